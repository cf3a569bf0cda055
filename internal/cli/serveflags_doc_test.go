package cli

import (
	"os"
	"strings"
	"testing"
)

// The documents name exactly the variables `serve` has a flag for (CONTRACT.md
// §2 and docs/CLI.md's Commands table): every flag of flagVars appears in both, so
// a flag added here cannot go unmentioned.
func TestServeFlagsAreDocumented(t *testing.T) {
	for path, marker := range map[string]string{
		"../../docs/CONTRACT.md": "`lrosink serve` also takes a flag for some",
		"../../docs/CLI.md":      "| `lrosink serve` |",
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(b), marker)
		if !ok {
			t.Errorf("%s: %q not found", path, marker)
			continue
		}
		para, _, _ := strings.Cut(rest, "\n\n")
		if path == "../../docs/CLI.md" {
			para, _, _ = strings.Cut(rest, "\n")
		}
		for name := range flagVars() {
			if !strings.Contains(para, "`--"+name+"`") {
				t.Errorf("%s: serve's flag --%s (%s) is not listed", path, name, flagVars()[name])
			}
		}
	}
}
