package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/lrosink/lrosink", Version: "v1.4.0"}},
			"lrosink v1.4.0 (revision unknown) go1.26.8"},
		{"go build in a clean checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.time", Value: "2026-11-23T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			"lrosink (devel) (revision 0123456789ab, 2026-11-23T10:00:00Z) go1.26.8"},
		{"go build with local changes", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-11-23T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"lrosink (devel) (revision 0123456789ab+modified, 2026-11-23T10:00:00Z) go1.26.8"},
		{"no build info", nil, "lrosink (unknown version) (revision unknown)"},
	} {
		if got := versionLine(c.bi); got != c.want {
			t.Errorf("%s: versionLine = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestVersionCommandAndFlag(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		r := run(t, nil, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "lrosink ") || !strings.HasSuffix(r.stdout, "\n") || r.stderr != "" {
			t.Errorf("lrosink %v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := run(t, nil, "version", "extra"); r.code != 2 || !strings.Contains(r.stderr, "unexpected argument") {
		t.Errorf("lrosink version extra: exit %d, stderr %q", r.code, r.stderr)
	}
}
