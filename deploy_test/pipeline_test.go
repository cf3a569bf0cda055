package deploy_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The Cloud Build test step must be able to run `make test`, the project's
// one test command: every tool that `make test` calls (directly in the
// Makefile or in the scripts it runs) has to come with the step's image or
// be installed by the step. This test derives both sides from the files
// themselves, so adding a tool to a script without installing it in the
// pipeline fails here, not in the first real build (where it stopped every
// image from being pushed: make test needed terraform, the step had none).
func TestCloudBuildTestStepHasEveryToolMakeTestCalls(t *testing.T) {
	need := toolsOfMakeTarget(t, "../Makefile", "test")
	if len(need.tools) == 0 {
		t.Fatal("found no tools in make test: the Makefile parser is broken")
	}
	step := cloudBuildStep(t, "../cloudbuild.yaml", "test")
	if !regexp.MustCompile(`(?m)^\s*make test\s*$`).MatchString(step.script) {
		t.Errorf("the test step does not run `make test` (the one test command):\n%s", step.script)
	}
	have := providedTools(step)
	for _, tool := range need.sortedTools() {
		if !have[tool] {
			t.Errorf("make test calls %s (%s) but the Cloud Build test step (image %s, apt packages %v) does not install it",
				tool, need.tools[tool], step.image, step.packages)
		}
	}
	for _, pkg := range need.sortedPackages() {
		if !slices.Contains(step.packages, pkg) {
			t.Errorf("make test needs the package %s (%s) but the Cloud Build test step does not install it", pkg, need.packages[pkg])
		}
	}
}

// Pin the parser against the real files: these tools are called today, so a
// parser that stops seeing them would make the test above vacuous.
func TestMakeTestToolsAreFound(t *testing.T) {
	need := toolsOfMakeTarget(t, "../Makefile", "test")
	for _, tool := range []string{"go", "gofmt", "terraform", "gcloud", "java", "curl"} {
		if _, ok := need.tools[tool]; !ok {
			t.Errorf("the Makefile/scripts parser did not find %s among the tools of make test: %v", tool, need.sortedTools())
		}
	}
	for _, pkg := range []string{"google-cloud-cli-firestore-emulator", "google-cloud-cli-pubsub-emulator"} {
		if _, ok := need.packages[pkg]; !ok {
			t.Errorf("the parser did not find the package %s among the needs of make test: %v", pkg, need.sortedPackages())
		}
	}
}

// needs maps each required tool or package to where it was found.
type needs struct {
	tools, packages map[string]string
}

func (n needs) sortedTools() []string    { return slices.Sorted(maps.Keys(n.tools)) }
func (n needs) sortedPackages() []string { return slices.Sorted(maps.Keys(n.packages)) }

// shellWords are not tools: shell keywords and builtins, and the base
// utilities every Debian image has (coreutils, util-linux, grep, sed).
var shellWords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "for": true, "while": true, "do": true, "done": true,
	"case": true, "esac": true, "in": true, "echo": true, "printf": true, "exit": true, "set": true, "export": true,
	"local": true, "return": true, "source": true, ".": true, "[": true, "[[": true, "test": true, "true": true, "false": true,
	"cd": true, "trap": true, "command": true, "shift": true, "read": true, "wait": true, "kill": true, "sleep": true,
	"exec": true, "eval": true, "env": true, "cat": true, "tail": true, "head": true, "grep": true, "sed": true, "tr": true,
	"cut": true, "sort": true, "mktemp": true, "rm": true, "mkdir": true, "du": true, "seq": true, "dirname": true,
	"basename": true, "readlink": true, "setsid": true, "tee": true, "xargs": true, "find": true, "wc": true, "date": true,
	"out": true, "bash": true, "sh": true, "make": true,
}

// markerPackages: a script that mentions the marker needs the package (the
// emulators are found by path under the Cloud SDK, not by command -v).
var markerPackages = map[string]string{
	"platform/cloud-firestore-emulator": "google-cloud-cli-firestore-emulator",
	"platform/pubsub-emulator":          "google-cloud-cli-pubsub-emulator",
}

// toolsOfMakeTarget returns what `make target` runs: the first word of every
// command in the recipes of target and its prerequisites (variables expanded),
// and, for every script those recipes run, the tools it checks with
// `command -v` and the packages its markers need, recursively.
func toolsOfMakeTarget(t *testing.T, makefile, target string) needs {
	t.Helper()
	rules, vars := parseMakefile(t, makefile)
	n := needs{tools: map[string]string{}, packages: map[string]string{}}
	seenTargets, seenScripts := map[string]bool{}, map[string]bool{}
	var visitTarget func(string)
	var visitScript func(string)
	visitScript = func(path string) {
		if seenScripts[path] {
			return
		}
		seenScripts[path] = true
		src := readFile(t, filepath.Join("..", path))
		for _, m := range regexp.MustCompile(`command -v ([A-Za-z0-9_.-]+)`).FindAllStringSubmatch(src, -1) {
			n.tools[m[1]] = path
		}
		for marker, pkg := range markerPackages {
			if strings.Contains(src, marker) {
				n.packages[pkg] = path
			}
		}
		for _, m := range regexp.MustCompile(`\bscripts/[A-Za-z0-9_./-]+\.sh\b`).FindAllString(src, -1) {
			visitScript(m)
		}
	}
	visitTarget = func(name string) {
		if seenTargets[name] {
			return
		}
		seenTargets[name] = true
		r, ok := rules[name]
		if !ok {
			t.Fatalf("%s: no rule for target %q", makefile, name)
		}
		for _, dep := range r.deps {
			visitTarget(dep)
		}
		for _, line := range r.recipe {
			line = expandVars(line, vars)
			for _, word := range commandWords(line) {
				switch {
				case strings.HasPrefix(word, "scripts/") && strings.HasSuffix(word, ".sh"):
					visitScript(word)
				case !shellWords[word]:
					n.tools[word] = makefile + " target " + name
				}
			}
		}
	}
	visitTarget(target)
	return n
}

type makeRule struct {
	deps   []string
	recipe []string
}

func parseMakefile(t *testing.T, path string) (map[string]makeRule, map[string]string) {
	t.Helper()
	rules, vars := map[string]makeRule{}, map[string]string{}
	assign := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*(\?=|:=|=)\s*(.*)$`)
	ruleLine := regexp.MustCompile(`^([A-Za-z0-9_.-]+)\s*:([^=].*)?$`)
	var cur string
	lines := strings.Split(strings.ReplaceAll(readFile(t, path), "\\\n", " "), "\n")
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "\t"):
			if cur != "" {
				r := rules[cur]
				r.recipe = append(r.recipe, strings.TrimSpace(line))
				rules[cur] = r
			}
		case assign.MatchString(line):
			m := assign.FindStringSubmatch(line)
			vars[m[1]] = strings.TrimSpace(m[3])
			cur = ""
		case ruleLine.MatchString(line):
			m := ruleLine.FindStringSubmatch(line)
			cur = m[1]
			rules[cur] = makeRule{deps: strings.Fields(m[2])}
		default:
			if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
				continue
			}
			cur = ""
		}
	}
	return rules, vars
}

func expandVars(s string, vars map[string]string) string {
	for i := 0; i < 5 && strings.Contains(s, "$("); i++ {
		s = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(s, func(m string) string {
			return vars[m[2:len(m)-1]]
		})
	}
	return strings.ReplaceAll(s, "$$", "$")
}

// commandWords returns the first word of each simple command in a shell
// line (after separators, pipes and command substitutions), skipping
// variable assignments and make's @/- prefixes.
func commandWords(line string) []string {
	// Quoted text is data (messages), never a command.
	line = regexp.MustCompile(`"[^"]*"|'[^']*'`).ReplaceAllString(line, "STR")
	var out []string
	for _, seg := range regexp.MustCompile(`;|&&|\|\||\||\$\(|\(|\)|\bthen\b|\bdo\b`).Split(line, -1) {
		fields := strings.Fields(seg)
		for len(fields) > 0 && (strings.Contains(fields[0], "=") || fields[0] == "@" || fields[0] == "-") {
			fields = fields[1:]
		}
		if len(fields) == 0 {
			continue
		}
		w := strings.TrimLeft(fields[0], "@-")
		if w == "" || strings.HasPrefix(w, "$") || strings.HasPrefix(w, "\"") || strings.HasPrefix(w, "'") {
			continue
		}
		out = append(out, w)
	}
	return out
}

type buildStep struct {
	image    string
	script   string
	packages []string
}

func cloudBuildStep(t *testing.T, path, id string) buildStep {
	t.Helper()
	var cb struct {
		Steps []struct {
			ID   string   `yaml:"id"`
			Name string   `yaml:"name"`
			Args []string `yaml:"args"`
		} `yaml:"steps"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, path)), &cb); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, s := range cb.Steps {
		if s.ID != id {
			continue
		}
		script := strings.Join(s.Args, "\n")
		step := buildStep{image: s.Name, script: script}
		joined := strings.ReplaceAll(script, "\\\n", " ")
		for _, m := range regexp.MustCompile(`apt-get install ([^\n;&|]*)`).FindAllStringSubmatch(joined, -1) {
			for _, f := range strings.Fields(m[1]) {
				if strings.HasPrefix(f, "-") {
					continue
				}
				pkg, _, _ := strings.Cut(f, "=")
				step.packages = append(step.packages, pkg)
			}
		}
		return step
	}
	t.Fatalf("%s: no step with id %q", path, id)
	return buildStep{}
}

// imageTools: what the base images used for the test step bring. golang:*
// is Debian with buildpack-deps (curl, git, gnupg, gcc, make).
var imageTools = map[string][]string{
	// flock is util-linux's, an Essential package of every Debian image.
	"golang:": {"go", "gofmt", "gcc", "git", "curl", "gpg", "make", "flock"},
}

// packageTools: the binaries a Debian package installs onto PATH.
var packageTools = map[string][]string{
	"google-cloud-cli":        {"gcloud", "gsutil", "bq"},
	"openjdk-17-jre-headless": {"java"},
	"terraform":               {"terraform"},
	"curl":                    {"curl"},
	"gnupg":                   {"gpg"},
	"git":                     {"git"},
	"chromium":                {"chromium"},
	"nodejs":                  {"node", "npm"},
}

func providedTools(s buildStep) map[string]bool {
	have := map[string]bool{}
	for prefix, tools := range imageTools {
		if strings.HasPrefix(s.image, prefix) {
			for _, tool := range tools {
				have[tool] = true
			}
		}
	}
	for _, pkg := range s.packages {
		for _, tool := range packageTools[pkg] {
			have[tool] = true
		}
	}
	return have
}

// `gcloud builds submit` uploads what .gcloudignore does not exclude, and
// the build runs `make test` on it: no pattern may exclude a file of the
// source tree (the Go packages, terraform/, docs/, deploy_test/, scripts/,
// the Makefile, ...). Excluding .git is fine: the suite passes without it
// (scripts/check-deploy.sh runs the version test on a git archive copy).
func TestGcloudignoreKeepsTheSource(t *testing.T) {
	var patterns []string
	for _, l := range strings.Split(readFile(t, "../.gcloudignore"), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue // comments, and #!include:.gitignore (files git ignores are not source)
		}
		patterns = append(patterns, l)
	}
	if !slices.Contains(patterns, ".git") {
		t.Error(".gcloudignore does not drop .git: the upload would carry the whole history")
	}
	checked := 0
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		if rel == "." {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || strings.HasSuffix(d.Name(), ".test") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel = filepath.ToSlash(rel)
		// Directories, and the kinds of files the source is made of (not a
		// developer's local state or binaries, which are rightly excluded).
		if !d.IsDir() && !sourceFile[filepath.Ext(rel)] && !sourceFile[d.Name()] {
			return nil
		}
		checked++
		for _, p := range patterns {
			if ignoreMatches(p, rel, d.IsDir()) {
				t.Errorf(".gcloudignore pattern %q excludes %s, which the build needs", p, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("walked %d paths: the walk is broken", checked)
	}
}

var sourceFile = map[string]bool{
	".go": true, ".tf": true, ".hcl": true, ".md": true, ".sh": true, ".yaml": true, ".json": true,
	".html": true, ".css": true, ".js": true, ".png": true, ".sql": true, ".txt": true,
	"Makefile": true, "Dockerfile": true, "go.mod": true, "go.sum": true,
}

// ignoreMatches applies one gitignore-style pattern (the subset
// .gcloudignore uses) to a slash-separated path relative to the root.
func ignoreMatches(p, rel string, dir bool) bool {
	if strings.HasSuffix(p, "/") {
		if !dir {
			return false
		}
		p = strings.TrimSuffix(p, "/")
	}
	if rest, ok := strings.CutPrefix(p, "**/"); ok {
		m, _ := filepath.Match(rest, filepath.Base(rel))
		return m
	}
	if strings.Contains(p, "/") {
		m, _ := filepath.Match(strings.TrimPrefix(p, "/"), rel)
		return m
	}
	m, _ := filepath.Match(p, filepath.Base(rel))
	return m
}
