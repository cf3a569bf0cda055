package cli

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/lrosink/lrosink/internal/cli/command"
)

func versionDoc() command.Doc {
	return command.Doc{
		Path: "version",
		Summary: `Print the module version and the VCS revision this binary was built from (from the
Go build information): a release tag when installed with go install ...@vX.Y.Z, the
commit (with +modified for local changes) when built with go build in a checkout.`,
		Examples: []string{"lrosink version", "lrosink --version"},
	}
}

func runVersion(_ context.Context, e *env, args []string) error {
	if _, err := versionDoc().Parse(e.stdout, command.NewFlagSet("version"), args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(e.stdout, versionLine(bi))
	return nil
}

// versionLine is "lrosink VERSION (revision REV[+modified], TIME) GOVERSION".
func versionLine(bi *debug.BuildInfo) string {
	if bi == nil {
		return "lrosink (unknown version) (revision unknown)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(unknown version)"
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	vcs := "revision unknown"
	if rev != "" {
		vcs = "revision " + rev[:min(12, len(rev))] + modified
		if at != "" {
			vcs += ", " + at
		}
	}
	return fmt.Sprintf("lrosink %s (%s) %s", version, vcs, bi.GoVersion)
}
