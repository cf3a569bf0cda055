// Package emutest connects tests to the Firestore and Pub/Sub emulators that
// `make test` starts (scripts/with-emulators.sh). A test that needs an
// emulator fails, never skips, when it is not there: a silent skip would let
// CI pass without testing the stores.
package emutest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
)

const hint = "is not set: run the tests with `make test`, which starts the emulators (scripts/with-emulators.sh)"

// ProjectID returns a fresh project id. Each test gets its own project on the
// emulators, so tests are isolated without resetting shared state.
func ProjectID(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random project id: %v", err)
	}
	return "lrosink-test-" + hex.EncodeToString(b)
}

// FirestoreHost returns FIRESTORE_EMULATOR_HOST or fails the test.
func FirestoreHost(t testing.TB) string {
	t.Helper()
	h := os.Getenv("FIRESTORE_EMULATOR_HOST")
	if h == "" {
		t.Fatal("FIRESTORE_EMULATOR_HOST " + hint)
	}
	return h
}

// PubSubHost returns PUBSUB_EMULATOR_HOST or fails the test.
func PubSubHost(t testing.TB) string {
	t.Helper()
	h := os.Getenv("PUBSUB_EMULATOR_HOST")
	if h == "" {
		t.Fatal("PUBSUB_EMULATOR_HOST " + hint)
	}
	return h
}

// Firestore returns a client for a fresh project on the emulator, closed when
// the test ends.
func Firestore(t testing.TB) (*firestore.Client, string) {
	t.Helper()
	FirestoreHost(t)
	project := ProjectID(t)
	c, err := firestore.NewClient(context.Background(), project)
	if err != nil {
		t.Fatalf("firestore emulator client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, project
}

// PubSub returns a client for a fresh project on the emulator, closed when
// the test ends.
func PubSub(t testing.TB) (*pubsub.Client, string) {
	t.Helper()
	PubSubHost(t)
	project := ProjectID(t)
	c, err := pubsub.NewClient(context.Background(), project)
	if err != nil {
		t.Fatalf("pubsub emulator client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, project
}

// CreateTopic creates the topic name (projects/P/topics/T) on the emulator.
func CreateTopic(t testing.TB, c *pubsub.Client, name string) {
	t.Helper()
	if _, err := c.TopicAdminClient.CreateTopic(t.Context(), &pubsubpb.Topic{Name: name}); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}
