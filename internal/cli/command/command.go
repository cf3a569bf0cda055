// Package command holds what every lrosink subcommand shares: flag sets
// that allow flags after positional arguments, and one --help layout.
package command

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Doc is a command's --help text.
type Doc struct {
	Path     string // command path after "lrosink", e.g. "ops list"
	Args     string // synopsis after the path
	Summary  string // what it does, one or more lines
	Env      string // environment notes, optional
	Examples []string
}

// NewFlagSet returns a flag set that neither prints nor exits by itself:
// Parse's caller decides where help and errors go.
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Parse parses args against fs and returns the positional arguments. Flags
// may come before, between or after them (`rotate ID --revoke-now`); "--"
// ends flag parsing. It returns flag.ErrHelp when help was asked for.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// WriteHelp writes d and fs's flags in the one lrosink help layout.
func WriteHelp(w io.Writer, fs *flag.FlagSet, d Doc) {
	fmt.Fprintf(w, "Usage: lrosink %s %s\n\n%s\n", d.Path, d.Args, strings.TrimSpace(d.Summary))
	fmt.Fprint(w, "\nFlags:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if typ != "" {
			name += " " + typ
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
	})
	fmt.Fprintf(tw, "  -h, --help\tshow this help\n")
	_ = tw.Flush()
	if d.Env != "" {
		fmt.Fprintf(w, "\nEnvironment:\n%s\n", strings.TrimRight(d.Env, "\n"))
	}
	if len(d.Examples) > 0 {
		fmt.Fprint(w, "\nExamples:\n")
		for _, ex := range d.Examples {
			fmt.Fprintf(w, "  %s\n", ex)
		}
	}
}

// ListValue is a repeatable flag; each use may also hold a comma-separated
// list. Duplicates are dropped, order kept.
type ListValue []string

func (l *ListValue) String() string { return strings.Join(*l, ",") }

// Set adds the comma-separated values of s.
func (l *ListValue) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(*l, p) {
			*l = append(*l, p)
		}
	}
	return nil
}
