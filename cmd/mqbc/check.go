package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

func init() {
	register(&command{
		Name:    "check",
		Usage:   "mqbc check FILE… [--state DIR]",
		Summary: "compile .mqb files, open every connection and check every premise of each route's verdict, moving no record; exit 1 when one fails",
		Run:     runCheck,
	})
}

// runCheck is a dry run of `mqbc run`'s start-up: the routes are built as
// run builds them (connections opened, tables a sink creates created,
// queries prepared) and each premise is checked against the live systems
// and printed, ok or FAILED, one line each. No record is read.
func runCheck(args []string, stdout, stderr io.Writer) int {
	c := commands["check"]
	fs := newFlags(c, stderr)
	stateDir := fs.String("state", "", stateFlagDoc)
	paths, ok := parseFiles(c, fs, args, stderr, nil)
	if !ok {
		return exitUsage
	}
	p, ok := compileReported(c, paths, "text", stderr)
	if !ok {
		return exitError
	}
	writeVerdicts(stdout, p.Redacted())
	if err := applyStateDir(p, *stateDir); err != nil {
		fmt.Fprintln(stderr, "mqbc check: --state:", err)
		return exitUsage
	}
	resolvePaths(p)
	return checkPlan(p, *stateDir, stdout, stderr)
}

// checkPlan checks a compiled plan's premises and connections (`mqbc
// check`, `mqbc run --check`) and returns the exit code.
func checkPlan(p *plan.Plan, stateDir string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := runtime.Options{
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		StateDir: stateDir,
	}
	failed := false
	for _, r := range runtime.Check(ctx, *p, opts) {
		fmt.Fprintln(stdout, plan.RedactURLs(r.String()))
		if !r.OK {
			failed = true
		}
	}
	if failed {
		return exitError
	}
	return exitOK
}
