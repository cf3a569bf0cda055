package deploy_test

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// The google provider's schema check: every attribute and block the HCL
// sets must exist for its resource type (and be settable), and no required
// attribute or block may be missing. It reads the real provider's schema
// (`terraform providers schema -json` of google 7.45.0, gzipped) in place,
// from the team's shared reference directory beside the repository or from
// $LROSINK_PROVIDER_SCHEMA; it is never copied into the repository. Where
// the file is absent (a user's own clone), the test says so in one line,
// and scripts/check-deploy.sh runs terraform validate with the provider
// instead when it can be installed.

// providerSchemaEnv names a schema file to use instead of the shared one.
const providerSchemaEnv = "LROSINK_PROVIDER_SCHEMA"

// providerSchemaShared is <repository root>/../shared/reference/..., seen
// from this package's directory.
const providerSchemaShared = "../../shared/reference/google-provider-7.45.0-schema.json.gz"

// googleProvider is the provider address the schema file is keyed by.
const googleProvider = "registry.terraform.io/hashicorp/google"

type providerSchemas struct {
	ProviderSchemas map[string]struct {
		Provider          struct{ Block schemaBlock }            `json:"provider"`
		ResourceSchemas   map[string]struct{ Block schemaBlock } `json:"resource_schemas"`
		DataSourceSchemas map[string]struct{ Block schemaBlock } `json:"data_source_schemas"`
	} `json:"provider_schemas"`
}

type schemaBlock struct {
	Attributes map[string]schemaAttr      `json:"attributes"`
	BlockTypes map[string]schemaBlockType `json:"block_types"`
}

type schemaAttr struct {
	Required bool `json:"required"`
	Optional bool `json:"optional"`
	Computed bool `json:"computed"`
}

type schemaBlockType struct {
	NestingMode string      `json:"nesting_mode"`
	Block       schemaBlock `json:"block"`
	MinItems    int         `json:"min_items"`
	MaxItems    int         `json:"max_items"`
}

// googleSchema is the provider's schema: its provider block, and each
// resource and data source type's.
type googleSchema struct {
	provider    schemaBlock
	resources   map[string]schemaBlock
	dataSources map[string]schemaBlock
}

// loadGoogleSchema reads the schema file; where there is none it returns
// nil and a one-line reason.
func loadGoogleSchema(t *testing.T) (*googleSchema, string) {
	t.Helper()
	path := os.Getenv(providerSchemaEnv)
	if path == "" {
		path = providerSchemaShared
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		abs, _ := filepath.Abs(path)
		return nil, fmt.Sprintf("provider schema check not run: no %s (set %s to the gzipped `terraform providers schema -json`; scripts/check-deploy.sh runs terraform validate with the provider instead)", abs, providerSchemaEnv)
	} else if err != nil {
		t.Fatalf("provider schema: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("provider schema %s: %v", path, err)
	}
	var ps providerSchemas
	if err := json.NewDecoder(zr).Decode(&ps); err != nil {
		t.Fatalf("provider schema %s: %v", path, err)
	}
	g, ok := ps.ProviderSchemas[googleProvider]
	if !ok || len(g.ResourceSchemas) == 0 {
		t.Fatalf("provider schema %s: no resources of %s", path, googleProvider)
	}
	s := &googleSchema{provider: g.Provider.Block, resources: map[string]schemaBlock{}, dataSources: map[string]schemaBlock{}}
	for k, v := range g.ResourceSchemas {
		s.resources[k] = v.Block
	}
	for k, v := range g.DataSourceSchemas {
		s.dataSources[k] = v.Block
	}
	return s, ""
}

// metaArguments are Terraform's own, valid in every resource and data
// block whatever the provider's schema says.
var (
	metaAttributes = []string{"count", "for_each", "depends_on", "provider"}
	metaBlocks     = []string{"lifecycle", "provisioner", "connection"}
)

// checkSchema returns one line per place where c sets what the provider
// does not know or cannot set, or misses what it requires.
func checkSchema(c *config, s *googleSchema) []string {
	var out []string
	bad := func(b block, r hcl.Range, format string, a ...any) {
		out = append(out, fmt.Sprintf("%s:%d: %s: %s", filepath.Base(b.file), r.Start.Line, b.addr(), fmt.Sprintf(format, a...)))
	}
	check := func(b block, kinds map[string]schemaBlock, kind string) {
		sb, ok := kinds[b.Labels[0]]
		if !ok {
			bad(b, b.DefRange(), "the google provider has no %s type %s", kind, b.Labels[0])
			return
		}
		checkBody(b, b.Body, sb, b.Labels[0], true, bad)
		if lc := child(b.Body, "lifecycle"); lc != nil {
			checkIgnoreChanges(b, lc.Body, sb, bad)
		}
	}
	for _, b := range mapValues(c.resources) {
		check(b, s.resources, "resource")
	}
	for _, b := range mapValues(c.data) {
		check(b, s.dataSources, "data source")
	}
	for _, b := range c.all {
		if b.Type == "provider" && len(b.Labels) == 1 && b.Labels[0] == "google" {
			checkBody(b, b.Body, s.provider, "provider google", false, bad)
		}
	}
	slices.Sort(out)
	return out
}

type badFunc func(b block, r hcl.Range, format string, a ...any)

// checkBody checks one body against its block schema: every attribute
// known and settable, every block known (a dynamic block by its label,
// its content checked in turn), at most max_items of each, and every
// required attribute and every block with min_items present.
func checkBody(b block, body *hclsyntax.Body, sb schemaBlock, where string, top bool, bad badFunc) {
	for name, a := range body.Attributes {
		if top && slices.Contains(metaAttributes, name) {
			continue
		}
		sa, ok := sb.Attributes[name]
		switch {
		case !ok:
			if _, isBlock := sb.BlockTypes[name]; isBlock {
				bad(b, a.SrcRange, "%s: %s is a block, not an attribute", where, name)
			} else {
				bad(b, a.SrcRange, "%s has no attribute %q", where, name)
			}
		case !sa.Required && !sa.Optional:
			bad(b, a.SrcRange, "%s.%s is computed by the provider and cannot be set", where, name)
		}
	}
	static, present := map[string]int{}, map[string]bool{}
	for _, nb := range body.Blocks {
		name := nb.Type
		content := nb.Body
		if top && slices.Contains(metaBlocks, name) {
			continue
		}
		if name == "dynamic" {
			if len(nb.Labels) != 1 {
				bad(b, nb.TypeRange, "%s: a dynamic block needs one label", where)
				continue
			}
			name = nb.Labels[0]
			if cb := child(nb.Body, "content"); cb != nil {
				content = cb.Body
			} else {
				bad(b, nb.TypeRange, "%s: dynamic %q has no content block", where, name)
				continue
			}
		} else {
			static[name]++
		}
		present[name] = true
		bt, ok := sb.BlockTypes[name]
		if !ok {
			if _, isAttr := sb.Attributes[name]; isAttr {
				bad(b, nb.TypeRange, "%s: %s is an attribute (name = ...), not a block", where, name)
			} else {
				bad(b, nb.TypeRange, "%s has no block %q", where, name)
			}
			continue
		}
		checkBody(b, content, bt.Block, where+"."+name, false, bad)
	}
	for name, sa := range sb.Attributes {
		if sa.Required && body.Attributes[name] == nil {
			bad(b, body.SrcRange, "%s lacks the required attribute %q", where, name)
		}
	}
	for name, bt := range sb.BlockTypes {
		if bt.MinItems > 0 && !present[name] {
			bad(b, body.SrcRange, "%s lacks the required block %q", where, name)
		}
		if bt.MaxItems == 1 && static[name] > 1 {
			bad(b, body.SrcRange, "%s: block %q is allowed once, written %d times", where, name, static[name])
		}
	}
}

// checkIgnoreChanges: each lifecycle.ignore_changes path starts with an
// attribute or block of the resource (a misspelt one ignores nothing).
func checkIgnoreChanges(b block, lc *hclsyntax.Body, sb schemaBlock, bad badFunc) {
	a := attr(lc, "ignore_changes")
	if a == nil {
		return
	}
	tup, ok := a.Expr.(*hclsyntax.TupleConsExpr)
	if !ok {
		return // `all`
	}
	for _, e := range tup.Exprs {
		first, _, _ := strings.Cut(strings.TrimSpace(b.text(e)), "[")
		first, _, _ = strings.Cut(first, ".")
		_, isAttr := sb.Attributes[first]
		_, isBlock := sb.BlockTypes[first]
		if !isAttr && !isBlock {
			bad(b, e.Range(), "lifecycle.ignore_changes names %q, which the resource does not have", b.text(e))
		}
	}
}

// TestHCLMatchesTheProviderSchema: every resource, data source and the
// provider block against the google provider 7.45.0 schema.
func TestHCLMatchesTheProviderSchema(t *testing.T) {
	s, why := loadGoogleSchema(t)
	if s == nil {
		t.Log(why)
		return
	}
	c := loadConfig(t)
	for _, p := range checkSchema(c, s) {
		t.Error(p)
	}
	if len(c.resources) == 0 {
		t.Fatal("no resources checked")
	}
}

// TestSchemaCheckFindsMistakes: the check fails on the mistakes it is
// there for, made in a copy of terraform/ (the real files are never
// touched): a misspelt attribute, a computed one set, a missing required
// attribute, a misspelt block, a block given as an attribute, and a
// resource type that does not exist.
func TestSchemaCheckFindsMistakes(t *testing.T) {
	s, why := loadGoogleSchema(t)
	if s == nil {
		t.Log(why)
		return
	}
	dir := t.TempDir()
	paths, err := filepath.Glob(filepath.Join(tfDir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no .tf files in %s (err %v)", tfDir, err)
	}
	for _, p := range paths {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), []byte(readFile(t, p)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A typo in a real resource, where a reviewer would not see it.
	edit := func(file, from, to string) {
		t.Helper()
		p := filepath.Join(dir, file)
		src := readFile(t, p)
		if strings.Count(src, from) != 1 {
			t.Fatalf("%s: %q occurs %d times, want once (update this test)", file, from, strings.Count(src, from))
		}
		if err := os.WriteFile(p, []byte(strings.Replace(src, from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("run.tf", "max_instance_request_concurrency =", "max_instance_request_concurency =")
	edit("artifact_registry.tf", "  format        = \"DOCKER\"\n", "")
	extra := `
resource "google_pubsub_topic" "schema_probe" {
  name        = "probe"
  effective_labels = {}
}

resource "google_pubsub_subscription" "schema_probe" {
  name  = "probe"
  topic = "probe"

  expiration_policy {
    ttl = ""
  }

  retry_polcy {
    minimum_backoff = "10s"
  }

  push_config = {}
}

resource "google_pubsub_topik" "schema_probe" {
  name = "probe"
}
`
	if err := os.WriteFile(filepath.Join(dir, "probe.tf"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(checkSchema(loadConfigDir(t, dir), s), "\n")
	for _, want := range []string{
		`run.tf:`, `google_cloud_run_v2_service.service: google_cloud_run_v2_service.template has no attribute "max_instance_request_concurency"`,
		`google_artifact_registry_repository.images: google_artifact_registry_repository lacks the required attribute "format"`,
		`google_pubsub_topic.schema_probe: google_pubsub_topic.effective_labels is computed by the provider and cannot be set`,
		`google_pubsub_subscription.schema_probe: google_pubsub_subscription has no block "retry_polcy"`,
		`google_pubsub_subscription.schema_probe: google_pubsub_subscription: push_config is a block, not an attribute`,
		`google_pubsub_topik.schema_probe: the google provider has no resource type google_pubsub_topik`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the schema check did not report %q; it reported:\n%s", want, got)
		}
	}
}
