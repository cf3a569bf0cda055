package sink_test

import (
	"testing"

	"github.com/lrosink/lrosink/internal/emutest"
	"github.com/lrosink/lrosink/internal/sink"
)

// TestOpenPubSub: the sink opened with its own client publishes to the
// topic (Publish succeeds only once the server assigned an id).
func TestOpenPubSub(t *testing.T) {
	ctx := t.Context()
	c, project := emutest.PubSub(t)
	topic := "projects/" + project + "/topics/opened"
	emutest.CreateTopic(t, c, topic)
	p, err := sink.OpenPubSub(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, message("batches/opened")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := sink.OpenPubSub(ctx, "projects/"+project+"/topics/ab"); err == nil {
		t.Fatal("OpenPubSub accepted a topic id Pub/Sub refuses")
	}
}

// TestParseTopic follows Pub/Sub's resource-name rules.
func TestParseTopic(t *testing.T) {
	if p, err := sink.ParseTopic("projects/p1/topics/results"); err != nil || p != "p1" {
		t.Fatalf("ParseTopic(valid) = %q, %v", p, err)
	}
	for _, name := range []string{
		"", "results", "topics/results", "projects/p1/topics/", "projects//topics/results",
		"projects/p1/subscriptions/results", "projects/p1/topics/results/extra", "projects/P1/topics/results",
		"projects/p1/topics/9results", "projects/p1/topics/ab", "projects/p1/topics/goog-results", "projects/p1/topics/res ults",
	} {
		if _, err := sink.ParseTopic(name); err == nil {
			t.Errorf("ParseTopic(%q) accepted", name)
		}
	}
}
