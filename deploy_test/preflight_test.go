package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// preflightWorld is a PATH holding the few real utilities
// scripts/preflight.sh uses and a fake of every prerequisite it checks,
// each of which a case can remove; and an SDK tree under the fake gcloud
// with both emulators.
type preflightWorld struct {
	bin, sdk, apt string
	goVersion     string
}

func newPreflightWorld(t *testing.T) *preflightWorld {
	t.Helper()
	dir := t.TempDir()
	w := &preflightWorld{bin: filepath.Join(dir, "bin"), sdk: filepath.Join(dir, "sdk"), apt: filepath.Join(dir, "apt-get"), goVersion: "go1.26.0"}
	for _, d := range []string{w.bin, filepath.Join(w.sdk, "bin"), filepath.Join(w.sdk, "platform/pubsub-emulator/bin"),
		filepath.Join(w.sdk, "platform/cloud-firestore-emulator")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"bash", "sed", "dirname", "readlink", "id"} {
		p, err := exec.LookPath(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if err := os.Symlink(p, filepath.Join(w.bin, u)); err != nil {
			t.Fatal(err)
		}
	}
	fake := func(path, body string) {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"terraform", "java", "curl", "flock", "chromium"} {
		fake(filepath.Join(w.bin, tool), "exit 0")
	}
	fake(filepath.Join(w.bin, "go"), `[ "$1 $2" = "env GOVERSION" ] && echo "$FAKE_GOVERSION"`)
	fake(filepath.Join(w.sdk, "bin/gcloud"), "exit 0")
	if err := os.Symlink(filepath.Join(w.sdk, "bin/gcloud"), filepath.Join(w.bin, "gcloud")); err != nil {
		t.Fatal(err)
	}
	fake(filepath.Join(w.sdk, "platform/pubsub-emulator/bin/cloud-pubsub-emulator"), "exit 0")
	fake(filepath.Join(w.sdk, "platform/cloud-firestore-emulator/cloud_firestore_emulator"), "exit 0")
	fake(w.apt, "exit 0")
	return w
}

// run runs the preflight on the world's PATH and returns its stdout, its
// stderr lines and its exit status.
func (w *preflightWorld) run(t *testing.T, apt string) (string, []string, int) {
	t.Helper()
	cmd := exec.Command("../scripts/preflight.sh")
	cmd.Env = []string{"PATH=" + w.bin, "HOME=" + os.Getenv("HOME"), "FAKE_GOVERSION=" + w.goVersion, "LROSINK_APT_GET=" + apt}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatal(err)
	}
	var lines []string
	if s := strings.TrimSpace(errb.String()); s != "" {
		lines = strings.Split(s, "\n")
	}
	return out.String(), lines, cmd.ProcessState.ExitCode()
}

// TestPreflightNamesEachMissingPiece: scripts/preflight.sh, `make test`'s
// first step, passes with one line when every prerequisite is there, and
// otherwise exits 2 with one line per missing piece naming it and the
// command that installs it.
func TestPreflightNamesEachMissingPiece(t *testing.T) {
	t.Parallel()
	w := newPreflightWorld(t)
	out, errLines, code := w.run(t, "/nonexistent/apt-get")
	if code != 0 || len(errLines) != 0 || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, ": ok\n") {
		t.Fatalf("all present: exit %d, stdout %q, stderr %q; want 0 and one ok line", code, out, errLines)
	}

	for _, c := range []struct {
		remove []string
		want   []string // per missing piece, words its line must hold
	}{
		{[]string{"bin/terraform"}, []string{"terraform not found: install Terraform"}},
		{[]string{"bin/java"}, []string{"java not found", "apt-get install", "openjdk-17-jre-headless"}},
		{[]string{"bin/curl"}, []string{"curl not found", "apt-get install curl"}},
		{[]string{"bin/flock"}, []string{"flock not found", "apt-get install util-linux"}},
		{[]string{"bin/go"}, []string{"go not found", "https://go.dev/dl/"}},
		{[]string{"bin/gcloud"}, []string{"gcloud (google-cloud-cli) not found", "google-cloud-cli-firestore-emulator"}},
		{[]string{"sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator"}, []string{"Pub/Sub emulator", "google-cloud-cli-pubsub-emulator"}},
		{[]string{"sdk/platform/cloud-firestore-emulator/cloud_firestore_emulator"}, []string{"Firestore emulator", "gcloud components install"}},
		{[]string{"bin/chromium"}, []string{"chromium not found", "apt-get install chromium"}},
	} {
		t.Run(c.remove[0], func(t *testing.T) {
			w := newPreflightWorld(t)
			for _, r := range c.remove {
				if err := os.Remove(filepath.Join(filepath.Dir(w.bin), r)); err != nil {
					t.Fatal(err)
				}
			}
			_, lines, code := w.run(t, "/nonexistent/apt-get")
			if code != 2 || len(lines) != 1 {
				t.Fatalf("exit %d, stderr %q; want 2 and one line", code, lines)
			}
			for _, word := range c.want {
				if !strings.Contains(lines[0], word) || !strings.HasPrefix(lines[0], "preflight: ") {
					t.Errorf("line %q lacks %q", lines[0], word)
				}
			}
		})
	}

	t.Run("two missing, two lines", func(t *testing.T) {
		w := newPreflightWorld(t)
		for _, r := range []string{"terraform", "java"} {
			if err := os.Remove(filepath.Join(w.bin, r)); err != nil {
				t.Fatal(err)
			}
		}
		if _, lines, code := w.run(t, "/nonexistent/apt-get"); code != 2 || len(lines) != 2 {
			t.Fatalf("exit %d, stderr %q; want 2 and two lines", code, lines)
		}
	})

	t.Run("go older than go.mod", func(t *testing.T) {
		w := newPreflightWorld(t)
		w.goVersion = "go1.25.7"
		if _, lines, code := w.run(t, "/nonexistent/apt-get"); code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "go1.25.7 is older than go 1.26") {
			t.Fatalf("exit %d, stderr %q", code, lines)
		}
		w.goVersion = "go1.27rc1"
		if _, lines, code := w.run(t, "/nonexistent/apt-get"); code != 0 {
			t.Fatalf("go1.27rc1: exit %d, stderr %q", code, lines)
		}
	})

	// As root with apt-get (CI's fresh machine), a missing chromium is
	// installable: make test's ensure-chromium.sh installs it, so the
	// preflight lets it pass and says so.
	t.Run("chromium installable as root", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("only root may install chromium; the non-root case is above")
		}
		w := newPreflightWorld(t)
		if err := os.Remove(filepath.Join(w.bin, "chromium")); err != nil {
			t.Fatal(err)
		}
		out, lines, code := w.run(t, w.apt)
		if code != 0 || len(lines) != 0 || !strings.Contains(out, "chromium (to be installed by scripts/ensure-chromium.sh)") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, lines)
		}
	})
}
