package deploy_test

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Firestore has no per-collection IAM; the narrowest grant it supports is a
// role on the project conditioned on one database (docs/DEPLOY.md,
// "Firestore access"). Every Firestore grant of the configuration is such a
// grant, on a database the configuration declares; the runtime accounts get
// the ledger, the workers the consumer database, which is no ledger with
// separate_consumer_database.

// databaseCondition matches the one condition form used: the database
// itself, or anything under it.
var databaseCondition = regexp.MustCompile(`^resource\.name == "(projects/[^"/]+/databases/[^"/]+)" \|\| resource\.name\.startsWith\("(projects/[^"/]+/databases/[^"/]+)/"\)$`)

// firestoreGrant is a datastore role of one member, on one database.
type firestoreGrant struct {
	from             instance
	role, member, db string // db: the database's name, resolved
}

func firestoreGrants(t *testing.T, e *evaluator) []firestoreGrant {
	t.Helper()
	dbs := map[string]bool{}
	for _, d := range e.ofType("google_firestore_database") {
		if n, ok := d.str(nil, "name"); ok {
			dbs[n] = true
		}
	}
	var out []firestoreGrant
	for _, g := range append(e.ofType("google_project_iam_member"), e.ofType("google_project_iam_binding")...) {
		role, _ := g.str(nil, "role")
		if !strings.HasPrefix(role, "roles/datastore.") {
			continue
		}
		member, _ := g.str(nil, "member")
		cond := child(g.Body, "condition")
		expr, ok := g.str(bodyOf(cond), "expression")
		if cond == nil || !ok {
			t.Errorf("%s: %s for %s on the whole project: every database of the project, present and future; condition it on one database", g, role, member)
			continue
		}
		m := databaseCondition.FindStringSubmatch(expr)
		if m == nil || m[1] != m[2] {
			t.Errorf("%s: condition %q is not `resource.name == \"DB\" || resource.name.startsWith(\"DB/\")` for one database DB", g, expr)
			continue
		}
		project, db, _ := strings.Cut(strings.TrimPrefix(m[1], "projects/"), "/databases/")
		db = resolveName(e, db)
		if project != "var.project_id" {
			t.Errorf("%s: condition names project %q, not var.project_id", g, project)
		}
		if !dbs[db] {
			t.Errorf("%s: condition names database %q, which the configuration does not declare (%v)", g, db, slices.Sorted(maps.Keys(dbs)))
		}
		out = append(out, firestoreGrant{from: g, role: role, member: member, db: db})
	}
	return out
}

func TestFirestoreAccessIsScopedToADatabase(t *testing.T) {
	c := loadConfig(t)
	for _, separate := range []bool{false, true} {
		t.Run(fmt.Sprintf("separate_consumer_database=%v", separate), func(t *testing.T) {
			overrides := maps.Clone(everyOptional)
			overrides["separate_consumer_database"] = fmt.Sprint(separate)
			e, err := newEvaluator(c, overrides)
			if err != nil {
				t.Fatal(err)
			}
			ledger := ""
			for _, svc := range e.ofType("google_cloud_run_v2_service") {
				for _, v := range envs(svc) {
					if v.name == "LROSINK_FIRESTORE_DATABASE" {
						ledger = resolveName(e, v.value)
					}
				}
			}
			if ledger == "" {
				t.Fatal("no service has LROSINK_FIRESTORE_DATABASE")
			}
			got := map[string][]string{} // member -> "role on db"
			for _, g := range firestoreGrants(t, e) {
				got[g.member] = append(got[g.member], g.role+" on "+g.db)
			}
			// Each service's account on the ledger, with the role its entry
			// says (the Console reads only).
			for _, svc := range e.ofType("google_cloud_run_v2_service") {
				sa, _ := svc.str(bodyOf(child(svc.Body, "template")), "service_account")
				role := "roles/datastore.user"
				if functionTarget(svc) == "Console" {
					role = "roles/datastore.viewer"
				}
				if want := []string{role + " on " + ledger}; !slices.Equal(got[resourceOf(sa)+".member"], want) {
					t.Errorf("%s (%s): Firestore grants %v, want %v", svc.addr(), resourceOf(sa), got[resourceOf(sa)+".member"], want)
				}
			}
			// The worker: read/write on the consumer database, which is no
			// ledger when it is separate.
			worker := "serviceAccount:worker@p.iam.gserviceaccount.com"
			consumer := ledger
			if separate {
				consumer = "var.name_prefix-consumer"
				for _, d := range e.ofType("google_firestore_database") {
					if n, _ := d.str(nil, "name"); n != ledger {
						consumer = n
					}
				}
				if consumer == ledger || !strings.HasSuffix(consumer, "-consumer") {
					t.Fatalf("separate_consumer_database: no database of its own (%q)", consumer)
				}
			}
			if want := []string{"roles/datastore.user on " + consumer}; !slices.Equal(got[worker], want) {
				t.Errorf("results subscriber %s: Firestore grants %v, want %v", worker, got[worker], want)
			}
			// The worker's processed records get their TTL where it keeps them.
			for _, f := range e.ofType("google_firestore_field") {
				if f.key != "processed" {
					continue
				}
				if db, _ := f.str(nil, "database"); resolveName(e, db) != consumer {
					t.Errorf("%s: TTL policy on database %q, the worker's records are in %q", f.addr(), resolveName(e, db), consumer)
				}
			}
		})
	}
}
