package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/term"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

func init() {
	register(&command{
		Name:    "run",
		Usage:   "mqbc run FILE… [--check] [--state DIR] [--metrics-addr ADDR] [--log-level debug|info|warn|error] [--log-format text|json] [--progress auto|on|off] [--commit-interval DURATION] [--otlp-endpoint URL]",
		Summary: "compile .mqb files and run every route until finite sources end or SIGINT/SIGTERM drains them; --check only checks, as mqbc check does",
		Run:     runRun,
		Notes:   memoryNotes,
	})
}

func runRun(args []string, stdout, stderr io.Writer) int {
	c := commands["run"]
	fs := newFlags(c, stderr)
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics, the probes /healthz and /readyz (ready once every route has checked its premises and opened its source) and /tap for mqbc tap; :9464 listens on 127.0.0.1 only, 0.0.0.0:9464 on every interface")
	logLevel := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	check := fs.Bool("check", false, "check every premise and open every connection, as `mqbc check` does, then exit without reading a record")
	stateDir := fs.String("state", "", stateFlagDoc)
	otlpEndpoint := fs.String("otlp-endpoint", "", otlpEndpointDoc)
	progress := fs.String("progress", "auto", "progress line on stderr for file sources: auto (when stderr is a terminal), on or off")
	commitEvery := fs.Duration("commit-interval", 100*time.Millisecond, "how often each route saves its position past what it delivered, from 1ms to 1m; a route also commits sooner when its source waits for it (an http_server's clients, an amqp prefetch used up); a shorter interval sends a broker's acks and a checkpoint more often")
	paths, ok := parseFiles(c, fs, args, stderr, nil)
	if !ok {
		return exitUsage
	}
	if *commitEvery < time.Millisecond || *commitEvery > time.Minute {
		fmt.Fprintf(stderr, "mqbc run: --commit-interval: must be from 1ms to 1m, got %v\n", *commitEvery)
		return exitUsage
	}
	for flagName, v := range map[string][2]string{"log-format": {*logFormat, "text json"}, "progress": {*progress, "auto on off"}} {
		if err := oneOf(flagName, v[0], splitWords(v[1])...); err != nil {
			fmt.Fprintln(stderr, "mqbc run:", err)
			return exitUsage
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(stderr, "mqbc run: --log-level:", err)
		return exitUsage
	}

	// From here on SIGINT and SIGTERM drain the run rather than kill the
	// process: one that comes before the routes start stops them as they
	// start (runtime.StartInterruptedError).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, ok := compileReported(c, paths, "text", stderr)
	if !ok {
		return exitError
	}
	if writesStdout(p.Routes) {
		// The records own stdout: what mqbc says goes to stderr.
		stdout = stderr
	}
	writeVerdicts(stdout, p.Redacted())
	if err := applyStateDir(p, *stateDir); err != nil {
		fmt.Fprintln(stderr, "mqbc run: --state:", err)
		return exitUsage
	}
	resolvePaths(p)
	if *check {
		return checkPlan(p, *stateDir, stdout, stderr)
	}

	hopts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(stderr, hopts)
	if *logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, hopts)
	}
	opts := runtime.Options{Logger: slog.New(handler), StateDir: *stateDir, CommitInterval: *commitEvery}
	if *progress == "on" || *progress == "auto" && isTerminal(stderr) {
		opts.Progress = stderr
	}
	go func() {
		<-ctx.Done()
		if context.Cause(ctx) == context.Canceled {
			return // the run ended: stop() below
		}
		// A second signal stops at once, as a crash would: positions are
		// committed only past what was delivered, so a rerun replays the
		// rest. Without this a drain held up by a sink could only be
		// ended with SIGKILL.
		stop()
		opts.Logger.Warn("draining: in-flight batches finish and commit; a second SIGINT or SIGTERM stops at once, as a crash would")
	}()

	tp, flush, err := startTracing(*otlpEndpoint)
	if err != nil {
		fmt.Fprintln(stderr, "mqbc run: tracing:", err)
		return exitUsage
	}
	defer flush()
	if tp != nil {
		opts.Tracer = tp
	}

	if *metricsAddr != "" {
		reg := prometheus.NewRegistry()
		opts.Registerer = reg
		listen, err := metricsListenAddr(*metricsAddr)
		if err != nil {
			fmt.Fprintln(stderr, "mqbc run: --metrics-addr:", err)
			return exitUsage
		}
		names := make([]string, len(p.Routes))
		for i, r := range p.Routes {
			names[i] = r.Name
		}
		opts.Health = runtime.NewHealth(names)
		opts.Tap = runtime.NewTap()
		addr, err := runtime.ServeMetrics(ctx, listen, reg, opts.Health, opts.Tap)
		if err != nil {
			fmt.Fprintln(stderr, "mqbc run:", err)
			return exitError
		}
		// Every interface is said at warn level, so it shows by default.
		level := slog.LevelInfo
		if metricsReach(addr) == "every interface" {
			level = slog.LevelWarn
		}
		opts.Logger.Log(ctx, level, "serving metrics", "url", fmt.Sprintf("http://%s/metrics", addr), "listening", metricsReach(addr),
			"probes", fmt.Sprintf("http://%s/healthz http://%s/readyz", addr, addr), "tap", fmt.Sprintf("mqbc tap --addr %s ROUTE[.POINT]", addr))
	}

	// Where each route resumes shows at the default level: with text logs
	// as plain lines, with JSON logs as records (info, and warn for an
	// output gone under state that says it was delivered).
	for _, n := range stateNotes(ctx, *p, opts, paths) {
		switch {
		case *logFormat == "json" && n.warn:
			opts.Logger.Warn(n.msg, "route", n.route)
		case *logFormat == "json":
			opts.Logger.Info(n.msg, "route", n.route)
		case level > slog.LevelWarn:
		case n.warn:
			fmt.Fprintln(stderr, "mqbc run: warning: "+n.msg)
		default:
			fmt.Fprintln(stderr, "mqbc run: "+n.msg)
		}
	}

	start := time.Now()
	stats, err := runtime.Run(ctx, *p, opts)
	for _, r := range stats.Routes {
		unmatched := ""
		if r.Unmatched > 0 { // part of out: a switch without default dropped them
			unmatched = fmt.Sprintf(", unmatched %d", r.Unmatched)
		}
		added := ""
		if r.Added > 0 { // unnest turned records into several
			added = fmt.Sprintf(", added %d", r.Added)
		}
		fmt.Fprintf(stdout, "%s: in %d%s, out %d, deduplicated %d, filtered %d, dead-lettered %d, errors %d%s (%s)\n",
			r.Name, r.In, added, r.Out, r.Deduplicated, r.Filtered, r.DeadLettered, r.Errors, unmatched, time.Since(start).Round(time.Millisecond))
	}
	if se := (*runtime.StartInterruptedError)(nil); errors.As(err, &se) {
		fmt.Fprintln(stdout, "interrupted:", plan.RedactURLs(se.Error()))
		return exitInterrupted
	}
	if err != nil {
		fmt.Fprintln(stderr, "mqbc run:", plan.RedactURLs(err.Error()))
		return exitError
	}
	code := exitOK
	for _, r := range stats.Routes {
		switch {
		case r.Errors > 0: // the route's error says which; never exit 0 with errors
			code = exitError
		case !countsAddUp(r):
			fmt.Fprintf(stderr, "mqbc run: route %s: its counts do not add up: in %d + added %d is not out %d + deduplicated %d + filtered %d + dead-lettered %d + errors %d; "+
				"records may have been lost without an error, so the run fails: please report it\n",
				r.Name, r.In, r.Added, r.Out, r.Deduplicated, r.Filtered, r.DeadLettered, r.Errors)
			code = exitError
		case r.Interrupted && r.Unreplayable:
			fmt.Fprintf(stdout, "%s: interrupted after record %d (the records read are delivered); the input after it was not read and cannot be read again\n", r.Name, r.Committed)
			if code == exitOK {
				code = exitInterrupted
			}
		case r.Interrupted:
			fmt.Fprintf(stdout, "%s: interrupted at record %d (the records before it are committed); a rerun resumes there\n", r.Name, r.Committed)
			if code == exitOK {
				code = exitInterrupted
			}
		}
	}
	return code
}

// countsAddUp reports whether every record a route read ended in one of
// its other counts (runtime.RouteStats): a run whose route read a record
// it neither delivered, dropped nor dead-lettered must not exit 0, even
// when nothing said so.
func countsAddUp(r runtime.RouteStats) bool {
	return r.In+r.Added == r.Out+r.Deduplicated+r.Filtered+r.DeadLettered+r.Errors
}

func splitWords(s string) []string {
	var out []string
	for len(s) > 0 {
		var w string
		w, s, _ = cut(s, ' ')
		out = append(out, w)
	}
	return out
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// metricsListenAddr is where --metrics-addr listens: a port with no host
// (":9464") means loopback, so metrics are not served to the network by
// accident; a host, even 0.0.0.0, is taken as written.
func metricsListenAddr(flag string) (string, error) {
	host, port, err := net.SplitHostPort(flag)
	if err != nil {
		return "", fmt.Errorf("want HOST:PORT or :PORT, got %q", flag)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// metricsReach says, for the log line, who can reach the metrics address.
func metricsReach(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok {
		switch {
		case ta.IP.IsLoopback():
			return "loopback only"
		case ta.IP.IsUnspecified():
			return "every interface"
		}
	}
	return "this address"
}

// writesStdout reports whether a route writes records to stdout: its
// sink, a branch of it, or its DLQ's target.
func writesStdout(routes []plan.Route) bool {
	var under func(n *plan.Node) bool
	under = func(n *plan.Node) bool {
		if n.Kind == "stdout" {
			return true
		}
		for i := range n.Children {
			if under(&n.Children[i].Node) {
				return true
			}
		}
		return false
	}
	for _, r := range routes {
		for i := range r.Nodes {
			if under(&r.Nodes[i]) {
				return true
			}
		}
	}
	return false
}
