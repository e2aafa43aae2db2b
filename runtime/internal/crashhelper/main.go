// Command crashhelper runs a plan read from a JSON file with runtime.Run, so
// tests can SIGKILL a real process mid-run and check what survives. It
// prints the run's stats as JSON on stdout when the run ends.
//
//	crashhelper -plan plan.json
//
// MQB_CRASH_COMMIT_INTERVAL=5ms sets the routes' commit interval.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/mqb-dev/mqb/connector/all"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

func main() {
	planPath := flag.String("plan", "", "plan JSON file")
	flag.Parse()
	data, err := os.ReadFile(*planPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var p plan.Plan
	if err := json.Unmarshal(data, &p); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", *planPath, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// MQB_CRASH_LOG=info shows what a run was doing when a test gives up
	// on it; the default keeps killed runs' output short.
	level := slog.LevelWarn
	if os.Getenv("MQB_CRASH_LOG") == "info" {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opts := runtime.Options{Logger: log}
	// MQB_CRASH_COMMIT_INTERVAL (a Go duration) commits more often than
	// the default, so that kills of a fast route land after commits.
	if s := os.Getenv("MQB_CRASH_COMMIT_INTERVAL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "MQB_CRASH_COMMIT_INTERVAL:", err)
			os.Exit(2)
		}
		opts.CommitInterval = d
	}
	st, err := runtime.Run(ctx, p, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(st)
}
