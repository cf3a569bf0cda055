package deploy_test

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
)

// fanOutTopic is the google_pubsub_topic the Reconcile service publishes
// shard requests to (its LROSINK_RECONCILE_FANOUT_TOPIC), "" if none.
func fanOutTopic(reconcile instance) string {
	for _, e := range envs(reconcile) {
		if e.name == "LROSINK_RECONCILE_FANOUT_TOPIC" {
			return regexp.MustCompile(`google_pubsub_topic\.[A-Za-z0-9_-]+`).FindString(e.value)
		}
	}
	return ""
}

// reconcileService is the FUNCTION_TARGET=Reconcile service as e evaluates it.
func reconcileService(t *testing.T, e *evaluator) instance {
	t.Helper()
	for _, svc := range e.ofType("google_cloud_run_v2_service") {
		if functionTarget(svc) == "Reconcile" {
			return svc
		}
	}
	t.Fatal("no google_cloud_run_v2_service with FUNCTION_TARGET=Reconcile")
	return instance{}
}

// TestEveryShardTriggerCanInvokeReconcile: with the passes sharded, a
// tick's shard requests reach Reconcile only if (1) Reconcile's runtime
// account may publish on the fan-out topic it is configured with, (2) every
// subscription on that topic pushes to the Reconcile service URL with an
// OIDC token whose audience is that URL, (3) the token's account has
// run.invoker on Reconcile (and no role on another service, and runs no
// service), (4) the Pub/Sub service agent may mint its tokens, (5) a
// poison request is dead-lettered (max delivery attempts, with the agent's
// grants to move it), (6) Pub/Sub waits for the pass's answer (ack deadline
// at least LROSINK_RECONCILE_DEADLINE) and (7) there are instances for
// every shard pass and the coordinator at once (concurrency 1 each).
func TestEveryShardTriggerCanInvokeReconcile(t *testing.T) {
	c := loadConfig(t)
	for _, v := range []struct{ shards, attempt string }{{"1", "300s"}, {"1", "1800s"}, {"4", "300s"}, {"16", "600s"}, {"64", "120s"}} {
		t.Run(v.shards+"_shards_"+v.attempt, func(t *testing.T) {
			e, err := newEvaluator(c, map[string]string{"reconcile_shards": v.shards, "reconcile_attempt_deadline": fmt.Sprintf("%q", v.attempt)})
			if err != nil {
				t.Fatal(err)
			}
			checkFanOut(t, e, v.shards)
		})
	}
}

func checkFanOut(t *testing.T, e *evaluator, shards string) {
	rec := reconcileService(t, e)
	env := map[string]string{}
	for _, x := range envs(rec) {
		env[x.name] = x.value
	}
	if env["LROSINK_RECONCILE_SHARDS"] != shards {
		t.Errorf("%s: LROSINK_RECONCILE_SHARDS = %q, want var.reconcile_shards (%s)", rec, env["LROSINK_RECONCILE_SHARDS"], shards)
	}
	topic := fanOutTopic(rec)
	if topic == "" {
		t.Fatalf("%s: LROSINK_RECONCILE_FANOUT_TOPIC = %q names no google_pubsub_topic", rec, env["LROSINK_RECONCILE_FANOUT_TOPIC"])
	}
	runAs, _ := rec.str(bodyOf(child(rec.Body, "template")), "service_account")
	runtime := resourceOf(runAs)

	// (1) The coordinator may publish there.
	publishes := false
	for _, g := range e.ofType("google_pubsub_topic_iam_member") {
		tp, _ := g.str(nil, "topic")
		role, _ := g.str(nil, "role")
		m, _ := g.str(nil, "member")
		if resourceOf(tp) == topic && role == "roles/pubsub.publisher" && m == runtime+".member" {
			publishes = true
		}
	}
	if !publishes {
		t.Errorf("%s (Reconcile's runtime account) has no roles/pubsub.publisher on %s: the coordinator could not hand out shard passes", runtime, topic)
	}

	subs := 0
	for _, s := range e.ofType("google_pubsub_subscription") {
		if tp, _ := s.str(nil, "topic"); resourceOf(tp) != topic {
			continue
		}
		subs++
		// One shard publishes nothing: the ack deadline then need not
		// cover a pass (a precondition refuses a longer attempt deadline
		// when sharded).
		deadline := env["LROSINK_RECONCILE_DEADLINE"]
		if shards == "1" {
			deadline = "0s"
		}
		checkPush(t, e, s, rec, runtime, deadline)
	}
	if subs == 0 {
		t.Errorf("no google_pubsub_subscription on %s: shard requests would reach no one", topic)
	}

	// (7) One instance per shard pass and one for the coordinator.
	n, _ := new(big.Float).SetString(shards)
	want, _ := n.Int64()
	if want > 1 {
		want++
	}
	scaling := child(bodyOf(child(rec.Body, "template")), "scaling")
	maxi := rec.val(bodyOf(scaling), "max_instance_count")
	if maxi == cty.NilVal || maxi.Type() != cty.Number {
		t.Errorf("%s: max_instance_count cannot be evaluated", rec)
	} else if got, _ := maxi.AsBigFloat().Int64(); got < want {
		t.Errorf("%s: max_instance_count %d with %s shards, want at least %d (each pass has an instance to itself)", rec, got, shards, want)
	}
}

// checkPush checks one push subscription on the fan-out topic: (2) to (6).
func checkPush(t *testing.T, e *evaluator, s, rec instance, runtime, passDeadline string) {
	uri := rec.addr() + ".uri"
	pc := child(s.Body, "push_config")
	if pc == nil {
		t.Errorf("%s: no push_config: nothing would run the shard passes", s)
		return
	}
	if ep, _ := s.str(pc.Body, "push_endpoint"); ep != uri {
		t.Errorf("%s: push_endpoint = %q, want %s", s, ep, uri)
	}
	oidc := child(pc.Body, "oidc_token")
	if oidc == nil {
		t.Errorf("%s: push_config has no oidc_token: Cloud Run would answer 403 to every shard request", s)
		return
	}
	if aud, ok := s.str(oidc.Body, "audience"); ok && aud != uri {
		t.Errorf("%s: oidc_token.audience = %q, want %s", s, aud, uri)
	}
	email, _ := s.str(oidc.Body, "service_account_email")
	if !strings.HasPrefix(email, "google_service_account.") {
		t.Errorf("%s: oidc_token.service_account_email must reference a google_service_account (got %q)", s, email)
		return
	}
	sa := resourceOf(email)
	if sa == runtime {
		t.Errorf("%s: pushes as Reconcile's runtime account; give it its own", s)
	}
	for _, svc := range e.ofType("google_cloud_run_v2_service") {
		if ra, _ := svc.str(bodyOf(child(svc.Body, "template")), "service_account"); resourceOf(ra) == sa {
			t.Errorf("%s: pushes as %s's runtime account", s, svc)
		}
	}
	// (3) It may invoke Reconcile, and only Reconcile.
	invokes := false
	for _, g := range runGrants(t, e) {
		if g.member != sa+".member" {
			continue
		}
		if g.service == rec.addr() && g.role == "roles/run.invoker" {
			invokes = true
		} else {
			t.Errorf("%s: the push account %s also has %s on %s", g.from, sa, g.role, g.service)
		}
	}
	if !invokes {
		t.Errorf("%s: its push account %s has no roles/run.invoker on %s: every shard request would be refused", s, sa, rec.addr())
	}
	// (4) Pub/Sub's service agent may mint the account's tokens.
	mints := false
	for _, g := range e.ofType("google_service_account_iam_member") {
		id, _ := g.str(nil, "service_account_id")
		role, _ := g.str(nil, "role")
		m, _ := g.str(nil, "member")
		if id == sa+".name" && role == "roles/iam.serviceAccountTokenCreator" && strings.Contains(m, "@gcp-sa-pubsub.iam.gserviceaccount.com") {
			mints = true
		}
	}
	if !mints {
		t.Errorf("%s: the Pub/Sub service agent has no roles/iam.serviceAccountTokenCreator on %s (needed to sign the push's OIDC token in projects created before 2021-04-08)", s, sa)
	}
	// (5) Dead-lettered after a bounded number of nacks.
	dl := child(s.Body, "dead_letter_policy")
	dlt, _ := s.str(bodyOf(dl), "dead_letter_topic")
	if dl == nil || dlt == "" {
		t.Errorf("%s: no dead_letter_policy: a poison shard request (answered 400, a nack) would be redelivered until it expires", s)
	} else {
		if v := s.val(dl.Body, "max_delivery_attempts"); v == cty.NilVal || v.Type() != cty.Number {
			t.Errorf("%s: max_delivery_attempts not set", s)
		}
		agentPublishes, agentAcks := false, false
		for _, g := range e.ofType("google_pubsub_topic_iam_member") {
			tp, _ := g.str(nil, "topic")
			m, _ := g.str(nil, "member")
			role, _ := g.str(nil, "role")
			agentPublishes = agentPublishes || resourceOf(tp) == resourceOf(dlt) && role == "roles/pubsub.publisher" && strings.Contains(m, "gcp-sa-pubsub")
		}
		name, _ := s.str(nil, "name")
		for _, g := range e.ofType("google_pubsub_subscription_iam_member") {
			sub, _ := g.str(nil, "subscription")
			m, _ := g.str(nil, "member")
			role, _ := g.str(nil, "role")
			// By reference or by the subscription's name.
			onIt := resourceOf(sub) == s.addr() || sub == name
			agentAcks = agentAcks || onIt && role == "roles/pubsub.subscriber" && strings.Contains(m, "gcp-sa-pubsub")
		}
		if !agentPublishes || !agentAcks {
			t.Errorf("%s: the Pub/Sub service agent needs publisher on %s (%v) and subscriber on the subscription (%v) to dead-letter", s, resourceOf(dlt), agentPublishes, agentAcks)
		}
	}
	// (6) Pub/Sub waits for the pass's answer.
	ack := s.val(nil, "ack_deadline_seconds")
	d, err := time.ParseDuration(passDeadline)
	if ack == cty.NilVal || ack.Type() != cty.Number || err != nil {
		t.Errorf("%s: ack_deadline_seconds or LROSINK_RECONCILE_DEADLINE (%q) cannot be evaluated", s, passDeadline)
		return
	}
	secs, _ := ack.AsBigFloat().Int64()
	if time.Duration(secs)*time.Second < d || secs > 600 {
		t.Errorf("%s: ack_deadline_seconds %d, want at least the pass deadline %s and at most 600: Pub/Sub would redeliver a shard request while its pass runs", s, secs, d)
	}
}
