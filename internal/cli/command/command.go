// Package command is the one way every lrosink command works: lrosink
// itself, its groups (ops, webhooks) and every command in them. It holds
// the exit statuses, the errors that choose them, flag parsing that allows
// flags after positional arguments, the --help layout, and Group, the
// dispatcher of a command made of subcommands.
//
// A command is a function that parses its flags with Doc.Parse and returns
// an error; the Group that runs it turns the error into the exit status and
// the lines on stderr, the same way everywhere:
//
//	nil, --help answered      0
//	ExitStatus(n)             n, nothing printed (the command said why)
//	Usagef                    2, "lrosink PATH: msg" and a pointer to --help
//	*ConfigError              2, "lrosink PATH: line" for each line
//	anything else             1, "lrosink PATH: err"
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lrosink/lrosink/internal/humantime"
)

// Exit statuses of every lrosink command.
const (
	ExitOK    = 0 // done
	ExitError = 1 // a failure while working (a violation, an unreachable store)
	ExitUsage = 2 // a mistake on the command line or in the configuration
)

// ErrHelp is what Doc.Parse returns when it answered --help: exit 0.
var ErrHelp = flag.ErrHelp

// UsageError is a mistake on the command line: exit 2, with a pointer to
// the command's --help.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a UsageError.
func Usagef(format string, a ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, a...)}
}

// ConfigError is invalid configuration (a flag value or a variable): exit 2,
// one line per problem, each naming what is at fault.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ExitStatus ends a command with that status and prints nothing more: the
// command has already said why (a report, an HTTP answer, a nested group).
type ExitStatus int

func (s ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// Status is the error that carries exit status code: nil for 0.
func Status(code int) error {
	if code == ExitOK {
		return nil
	}
	return ExitStatus(code)
}

// Doc is a command's --help text, and what Parse checks its positional
// arguments against.
type Doc struct {
	Path string // command path after "lrosink", e.g. "ops list"
	Args string // synopsis after the path
	// Arg names the one positional argument the command takes ("NAME");
	// "" means it takes none.
	Arg string
	// ArgOptional lets the command run without its Arg too (`send
	// --list`): none or one positional argument.
	ArgOptional bool
	Summary     string // what it does, one or more lines
	Env         string // environment notes, optional
	Examples    []string
}

// NewFlagSet returns a flag set that neither prints nor exits by itself:
// Parse decides where help and errors go.
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Parse parses args against fs and returns the positional arguments: none,
// or exactly one when d.Arg names one. Flags may come before, between or
// after them (`rotate ID --revoke-now`); "--" ends flag parsing. --help or
// -h anywhere writes d's help to stdout and returns ErrHelp; a bad flag or
// a wrong number of arguments is a UsageError.
func (d Doc) Parse(stdout io.Writer, fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		WriteHelp(stdout, fs, d)
		return nil, ErrHelp
	case err != nil:
		return nil, Usagef("%s", flagError(err, fs))
	case d.Arg == "" && len(pos) > 0:
		return nil, Usagef("unexpected argument %q", pos[0])
	case d.Arg != "" && d.ArgOptional && len(pos) > 1:
		return nil, Usagef("want at most one %s, got %d arguments", d.Arg, len(pos))
	case d.Arg != "" && !d.ArgOptional && len(pos) != 1:
		return nil, Usagef("want exactly one %s, got %d arguments", d.Arg, len(pos))
	}
	return pos, nil
}

// flagError says what package flag reports in lrosink's words: flags are
// written with two dashes, as --help shows them; an unknown flag close to
// one of fs's gets "did you mean".
func flagError(err error, fs *flag.FlagSet) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := Suggest(name, names); s != "" {
			return fmt.Sprintf("unknown flag --%s; did you mean --%s?", name, s)
		}
		return "unknown flag --" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag --" + name + " needs a value"
	}
	// invalid value "x" for flag -limit: parse error
	return strings.Replace(msg, " for flag -", " for --", 1)
}

// parse parses args against fs, flags interspersed with the positional
// arguments it returns. flag.ErrHelp when help was asked for.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
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
func WriteHelp(w io.Writer, fs *flag.FlagSet, d Doc) { writeHelp(w, fs, d, nil) }

// writeHelp writes the layout: usage line, summary, the listing of a
// group's commands (when list is given), flags, environment, examples.
func writeHelp(w io.Writer, fs *flag.FlagSet, d Doc, list func(io.Writer)) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", join("lrosink", d.Path, d.Args), strings.TrimSpace(d.Summary))
	if list != nil {
		list(w)
	}
	fmt.Fprint(w, "\nFlags:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		if p, ok := goTypePlaceholder[typ]; ok && !strings.Contains(f.Usage, "`") {
			typ = p // a flag whose usage names no `VALUE`: never "--crash float"
		}
		name := "--" + f.Name
		if typ != "" {
			name += " " + typ
		}
		if def := defaultText(f); def != "" && def != "false" && def != "[]" {
			usage += " (default " + def + ")"
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

// defaultText is f's default as the help shows it: a duration as people
// write it ("8h", not "8h0m0s").
func defaultText(f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok && f.DefValue == d.String() {
			return humantime.Duration(d)
		}
	}
	return f.DefValue
}

// goTypePlaceholder is what the help shows for a flag whose usage names no
// `VALUE`, in place of the Go type package flag would show: one layout
// (upper-case placeholders) for every command.
var goTypePlaceholder = map[string]string{
	"float": "F", "int": "N", "uint": "N", "duration": "D", "string": "S", "value": "V",
}

// Command is one entry of a Group: a command, or a nested group (whose Run
// returns Status of the group's Run).
type Command struct {
	Summary string // one line for the group's listing
	Run     func(ctx context.Context, args []string) error
}

// Func is a Command running run with s, the state of one run of the
// program (its streams, environment, dependencies), as run's second argument.
func Func[S any](summary string, s S, run func(context.Context, S, []string) error) Command {
	return Command{Summary: summary, Run: func(ctx context.Context, args []string) error { return run(ctx, s, args) }}
}

// Group is a command made of subcommands: `lrosink`, `lrosink ops`,
// `lrosink webhooks`. Run answers every group the same way:
//
//	(nothing)                 its help on stderr, exit 2
//	--help, -h, help          its help on stdout, exit 0
//	help X ...                X ... --help
//	X ...                     runs X, maps its error (see the package doc)
//	unknown X                 "unknown (sub)command", its help on stderr, exit 2
type Group struct {
	// Doc is the group's help: Path ("" for lrosink), Summary, Env,
	// Examples. Args is filled in.
	Doc      Doc
	Commands map[string]Command
	// Aliases maps a flag to a command: {"version": "version"} makes
	// `--version` and `-version` run `version`.
	Aliases map[string]string
	Stdout  io.Writer
	Stderr  io.Writer
	// Redact, if set, filters every error line Run writes to Stderr (the
	// help it writes there is its own text): commands that hold secrets
	// remove them from errors they do not control.
	Redact func(string) string
}

// Run runs args (without the group's path) and returns the exit status.
func (g *Group) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		g.writeHelp(g.Stderr)
		return ExitUsage
	}
	name, rest := args[0], args[1:]
	switch {
	case name == "-h" || name == "-help" || name == "--help" || (name == "help" && len(rest) == 0):
		g.writeHelp(g.Stdout)
		return ExitOK
	case name == "help":
		name, rest = rest[0], append(slices.Clone(rest[1:]), "--help")
	case strings.HasPrefix(name, "-"):
		if target, ok := g.Aliases[strings.TrimPrefix(strings.TrimPrefix(name, "-"), "-")]; ok {
			name = target
		}
	}
	c, ok := g.Commands[name]
	if !ok {
		// A typo gets its correction and a pointer to --help, not the
		// whole listing under which the one line that matters scrolls away.
		if s := Suggest(name, slices.Collect(maps.Keys(g.Commands))); s != "" {
			g.say("%s: unknown %s %q; did you mean %q?\nRun '%s --help' for usage.", g.prog(), g.noun(), name, s, g.prog())
			return ExitUsage
		}
		g.say("%s: unknown %s %q\n", g.prog(), g.noun(), name)
		g.writeHelp(g.Stderr)
		return ExitUsage
	}
	return g.exitStatus(join(g.Doc.Path, name), c.Run(ctx, rest))
}

// exitStatus reports err, what the command at path returned, on Stderr and
// returns the exit status (see the package doc).
func (g *Group) exitStatus(path string, err error) int {
	var (
		es ExitStatus
		ue *UsageError
		ce *ConfigError
	)
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return ExitOK
	case errors.As(err, &es):
		return int(es)
	case errors.As(err, &ue):
		g.say("lrosink %s: %s\nRun 'lrosink %s --help' for usage.", path, ue.Msg, path)
		return ExitUsage
	case errors.As(err, &ce):
		for _, line := range strings.Split(ce.Error(), "\n") {
			g.say("lrosink %s: %s", path, line)
		}
		return ExitUsage
	default:
		g.say("lrosink %s: %v", path, err)
		return ExitError
	}
}

// say writes one redacted line to Stderr.
func (g *Group) say(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	if g.Redact != nil {
		s = g.Redact(s)
	}
	fmt.Fprintln(g.Stderr, s)
}

// prog is the group's name on the command line: "lrosink ops".
func (g *Group) prog() string { return join("lrosink", g.Doc.Path) }

// join joins the non-empty words with spaces.
func join(words ...string) string {
	return strings.Join(slices.DeleteFunc(words, func(w string) bool { return w == "" }), " ")
}

// noun is what the group calls its entries: lrosink has commands, a group
// in it subcommands.
func (g *Group) noun() string {
	if g.Doc.Path == "" {
		return "command"
	}
	return "subcommand"
}

// writeHelp writes the group's help in the layout of WriteHelp, with its
// commands listed before the flags (its aliases are its flags).
func (g *Group) writeHelp(w io.Writer) {
	noun := g.noun()
	d := g.Doc
	d.Args = strings.ToUpper(noun) + " [ARGS] [FLAGS]"
	fs := NewFlagSet(d.Path)
	for _, flagName := range slices.Sorted(maps.Keys(g.Aliases)) {
		fs.Bool(flagName, false, "same as '"+join(g.prog(), g.Aliases[flagName])+"'")
	}
	writeHelp(w, fs, d, func(w io.Writer) {
		fmt.Fprintf(w, "\n%s%ss:\n", strings.ToUpper(noun[:1]), noun[1:])
		tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
		for _, name := range slices.Sorted(maps.Keys(g.Commands)) {
			fmt.Fprintf(tw, "  %s\t%s\n", name, g.Commands[name].Summary)
		}
		_ = tw.Flush()
	})
	fmt.Fprintf(w, "\nRun '%s %s --help' for usage.\n", g.prog(), strings.ToUpper(noun))
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
