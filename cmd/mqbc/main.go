// Command mqbc is the mqb toolchain: it builds .mqb pipelines into plans
// (`mqbc build`), explains diagnostic codes (`mqbc explain`), draws plans
// (`mqbc graph`), and — in files added beside this one — formats and runs
// them. Each subcommand registers itself in commands from its file's init,
// so adding one never touches this file.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	// Every connector outside package runtime registers its kinds.
	_ "github.com/mqb-dev/mqb/connector/all"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitError = 1 // the input has errors (diagnostics were printed)
	exitUsage = 2 // the command line is wrong
	// exitInterrupted: SIGINT/SIGTERM drained a run whose finite source
	// was not read to the end (what was read is committed), or stopped it
	// before every route had started (nothing was read).
	exitInterrupted = 3
)

// command is one mqbc subcommand.
type command struct {
	Name    string
	Usage   string // e.g. "mqbc build FILE… [-o plan.json] [--format text|json]"
	Summary string // one line for `mqbc help`
	// Run executes the command with the arguments after its name and
	// returns the process exit code.
	Run func(args []string, stdout, stderr io.Writer) int
	// Notes, when set, follow the flags in the command's --help.
	Notes string
}

// commands holds every registered subcommand by name.
var commands = map[string]*command{}

// register adds a subcommand; call it from an init function.
func register(c *command) {
	if _, dup := commands[c.Name]; dup {
		panic("mqbc: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

func main() {
	applyMemoryDefaults()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help", "-help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				fmt.Fprintln(stdout, "usage: "+c.Usage)
				fmt.Fprintln(stdout, c.Summary)
				return exitOK
			}
		}
		usage(stdout)
		return exitOK
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "mqbc: unknown command %q\n", name)
		usage(stderr)
		return exitUsage
	}
	return c.Run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: mqbc <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].Summary)
	}
}

// newFlags returns a flag set that reports errors to stderr with the
// command's usage line instead of exiting.
func newFlags(c *command, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: "+c.Usage)
		fs.PrintDefaults()
		if c.Notes != "" {
			fmt.Fprintln(stderr, c.Notes)
		}
	}
	return fs
}

// parseInterspersed parses flags that may appear before, between or after
// positional arguments (`mqbc build a.mqb -o plan.json b.mqb`).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseFiles parses the flags and FILE… operands of c's command line, then
// checks format, unless nil, against formats, and that there is a file. On
// a wrong command line it says why on stderr and returns ok false: the
// command exits with exitUsage.
func parseFiles(c *command, fs *flag.FlagSet, args []string, stderr io.Writer, format *string, formats ...string) (paths []string, ok bool) {
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, false
	}
	if format != nil {
		if err := oneOf("format", *format, formats...); err != nil {
			fmt.Fprintln(stderr, "mqbc "+c.Name+":", err)
			return nil, false
		}
	}
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "usage: "+c.Usage)
		return nil, false
	}
	return paths, true
}

// oneOf checks an enumerated flag value.
func oneOf(flagName, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fmt.Errorf("--%s must be %s, not %q", flagName, strings.Join(allowed, " or "), v)
}
