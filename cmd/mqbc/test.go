package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mqb-dev/mqb/internal/pipetest"
)

func init() {
	register(&command{
		Name:    "test",
		Usage:   "mqbc test FILE.mqbtest|DIR…",
		Summary: "run declarative pipeline tests (.mqbtest): given input records, expect what the sink and the DLQ hold and the verdict; runs each route in-process against embedded sinks in a temporary directory (docs/testing.md)",
		Run:     runTest,
	})
}

func runTest(args []string, stdout, stderr io.Writer) int {
	c := commands["test"]
	fset := newFlags(c, stderr)
	if err := fset.Parse(args); err != nil {
		return exitUsage
	}
	if fset.NArg() == 0 {
		fmt.Fprintln(stderr, "usage:", c.Usage)
		return exitUsage
	}
	var files []string
	for _, a := range fset.Args() {
		st, err := os.Stat(a)
		if err != nil {
			fmt.Fprintln(stderr, "mqbc test:", err)
			return exitUsage
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".mqbtest") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			fmt.Fprintln(stderr, "mqbc test:", err)
			return exitUsage
		}
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "mqbc test: no .mqbtest file found")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed := 0
	for _, f := range files {
		if !testOne(ctx, f, stdout) {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "FAIL (%d of %d failed)\n", failed, len(files))
		return exitError
	}
	fmt.Fprintln(stdout, "PASS")
	return exitOK
}

// testOne runs one .mqbtest file and prints its outcome as go test does.
func testOne(ctx context.Context, path string, stdout io.Writer) bool {
	fmt.Fprintf(stdout, "=== RUN   %s\n", path)
	start := time.Now()
	var failures []string
	c, err := pipetest.Load(path)
	if err == nil {
		var dir string
		if dir, err = os.MkdirTemp("", "mqbtest"); err == nil {
			failures, err = pipetest.Run(ctx, c, dir)
			os.RemoveAll(dir)
		}
	}
	if err != nil {
		failures = append(failures, err.Error())
	}
	took := time.Since(start).Seconds()
	if len(failures) == 0 {
		fmt.Fprintf(stdout, "--- PASS: %s (%.2fs)\n", path, took)
		return true
	}
	fmt.Fprintf(stdout, "--- FAIL: %s (%.2fs)\n", path, took)
	for _, f := range failures {
		fmt.Fprintln(stdout, "    "+strings.TrimRight(f, "\n"))
	}
	return false
}
