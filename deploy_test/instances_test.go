package deploy_test

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Two instances of the configuration in one project, told apart only by
// name_prefix, must not create anything under the same name (Google
// answers the second one 409 already exists), and each of their names must
// carry its prefix, so a third instance is just as safe.

// nameAttrs are the attributes naming a resource within its project (and
// location), by resource type; a type not listed here has no name of its
// own (an IAM member, a project service) and fails the test, so a new
// resource is never left unchecked.
var nameAttrs = map[string][]string{
	"google_artifact_registry_repository": {"repository_id"},
	"google_cloud_run_v2_service":         {"name"},
	"google_cloud_scheduler_job":          {"name"},
	"google_cloudbuild_trigger":           {"name"},
	"google_firestore_database":           {"name"},
	"google_firestore_field":              {"database", "collection", "field"},
	"google_firestore_index":              {"database"}, // and its fields: the index of the same address
	"google_logging_metric":               {"name"},
	"google_monitoring_alert_policy":      {"display_name"},
	"google_project_iam_custom_role":      {"role_id"},
	"google_pubsub_subscription":          {"name"},
	"google_pubsub_topic":                 {"name"},
	"google_secret_manager_secret":        {"secret_id"},
	"google_service_account":              {"account_id"},
	"google_storage_bucket":               {"name"},
}

// unnamed are the types that name nothing: grants on an object the
// instance owns (their member and object differ between instances), and
// the project's APIs, which both instances enable alike (disable_on_destroy
// = false, so neither's destroy disables the other's).
var unnamed = regexp.MustCompile(`_iam_(member|binding)$|^google_project_service$`)

// instanceNames evaluates c with name_prefix = prefix and returns, per
// identity (type and naming values), the address that has it.
func instanceNames(t *testing.T, c *config, prefix string, overrides map[string]string) (ids map[string]string, names map[string][]string) {
	t.Helper()
	overrides = maps.Clone(overrides)
	if overrides == nil {
		overrides = map[string]string{}
	}
	overrides["name_prefix"] = fmt.Sprintf("%q", prefix)
	e, err := newEvaluator(c, overrides)
	if err != nil {
		t.Fatal(err)
	}
	ids, names = map[string]string{}, map[string][]string{}
	for _, b := range mapValues(c.resources) {
		typ := b.Labels[0]
		attrs, ok := nameAttrs[typ]
		if !ok {
			if !unnamed.MatchString(typ) {
				t.Errorf("%s: resource type %s is in neither nameAttrs nor unnamed: say what names it", b, typ)
			}
			continue
		}
		is, ok := e.instances(b)
		if !ok {
			t.Errorf("%s: for_each/count cannot be evaluated", b)
			continue
		}
		for _, in := range is {
			var vals []string
			for _, a := range attrs {
				v, ok := in.str(nil, a)
				if !ok {
					t.Errorf("prefix %s: %s.%s cannot be evaluated", prefix, in.addr(), a)
				}
				v = resolveName(e, v)
				vals = append(vals, v)
				names[in.addr()] = append(names[in.addr()], v)
			}
			id := typ + " " + strings.Join(vals, " ")
			if typ == "google_firestore_index" {
				id += " " + in.addr()
			}
			if prev, dup := ids[id]; dup {
				t.Errorf("prefix %s: %s and %s have the same name (%s)", prefix, prev, in.addr(), id)
			}
			ids[id] = in.addr()
		}
	}
	return ids, names
}

// resolveName replaces a reference to another resource's name (the
// symbol `google_firestore_database.ledger.name`) by that name, evaluated.
func resolveName(e *evaluator, v string) string {
	for range 5 {
		i := strings.LastIndex(v, ".")
		if i < 0 || !strings.HasPrefix(v, "google_") {
			return v
		}
		res, attrName := v[:i], v[i+1:]
		typ, _, _ := strings.Cut(res, ".")
		found := false
		for _, in := range e.ofType(typ) {
			if e.stateAddr(in) == res {
				if s, ok := in.str(nil, attrName); ok {
					v, found = s, true
				}
			}
		}
		if !found {
			return v
		}
	}
	return v
}

// Evaluated with the defaults, and with every optional resource present
// (invokers, subscribers, the consumer database of its own).
func TestTwoInstancesInOneProjectShareNoName(t *testing.T) {
	c := loadConfig(t)
	all := maps.Clone(everyOptional)
	all["separate_consumer_database"] = "true"
	for name, overrides := range map[string]map[string]string{"defaults": nil, "every optional resource": all} {
		t.Run(name, func(t *testing.T) { checkTwoInstances(t, c, overrides) })
	}
}

func checkTwoInstances(t *testing.T, c *config, overrides map[string]string) {
	prefixes := []string{"lrosink", "lrosink-b"}
	a, _ := instanceNames(t, c, prefixes[0], overrides)
	b, namesB := instanceNames(t, c, prefixes[1], overrides)
	if len(a) < 40 || len(a) != len(b) {
		t.Fatalf("%d and %d named instances: the evaluation is broken", len(a), len(b))
	}
	for id, addr := range a {
		if other, dup := b[id]; dup {
			t.Errorf("name_prefix %q and %q both create %s (%s and %s): the second apply fails with 409 (an alert policy: two instances page under one name)", prefixes[0], prefixes[1], id, addr, other)
		}
	}
	// Every name of the second instance carries its prefix (hyphens become
	// underscores where a name allows no hyphen); a Firestore field or
	// index is named by its database.
	underscored := strings.ReplaceAll(prefixes[1], "-", "_")
	for _, addr := range slices.Sorted(maps.Keys(namesB)) {
		if !strings.Contains(namesB[addr][0], prefixes[1]) && !strings.Contains(namesB[addr][0], underscored) {
			t.Errorf("name_prefix %q: %s is named %q, which does not derive from the prefix", prefixes[1], addr, namesB[addr][0])
		}
	}
}
