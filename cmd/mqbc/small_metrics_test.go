package main

import (
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMetricsListenAddr(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{":9464", "127.0.0.1:9464"},
		{"127.0.0.1:9464", "127.0.0.1:9464"},
		{"0.0.0.0:9464", "0.0.0.0:9464"},
		{"[::]:9464", "[::]:9464"},
		{"metrics.internal:9464", "metrics.internal:9464"},
		{"9464", ""},
	} {
		got, err := metricsListenAddr(tc.flag)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("metricsListenAddr(%q) = %q, %v; want %q", tc.flag, got, err, tc.want)
		}
	}
}

// TestRunMetricsLoopbackByDefault runs the binary with --metrics-addr :0:
// the log line shows it listening on 127.0.0.1 and says so; 0.0.0.0 is
// said at warn level, which shows without --log-level.
func TestRunMetricsLoopbackByDefault(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "in.jsonl", "{\"a\":1}\n")
	write(t, dir, "r.mqb", "route r {\n  from file { path = \"in.jsonl\" }\n  to file { path = \"out.jsonl\" }\n}\n")
	_, errs, code := mqbc(t, dir, "run", "--log-level", "info", "--metrics-addr", ":0", "r.mqb")
	if code != exitOK || !regexp.MustCompile(`msg="serving metrics" url=http://127\.0\.0\.1:[0-9]+/metrics listening="loopback only"`).MatchString(errs) {
		t.Errorf("exit %d, stderr:\n%s", code, errs)
	}
	_, errs, code = mqbc(t, dir, "run", "--metrics-addr", "0.0.0.0:0", "r.mqb")
	if code != exitOK || !regexp.MustCompile(`level=WARN msg="serving metrics" url=http://(0\.0\.0\.0|\[::\]):[0-9]+/metrics listening="every interface"`).MatchString(errs) {
		t.Errorf("0.0.0.0: exit %d, stderr:\n%s", code, errs)
	}
}

// TestRunHealthProbes: with --metrics-addr, /healthz answers as soon as
// the process serves, and /readyz says 503 while a route is still
// starting (its Kafka source cannot reach a broker) and 200 once every
// route has checked its premises and opened its source.
func TestRunHealthProbes(t *testing.T) {
	probe := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	start := func(dir string) (*exec.Cmd, *syncBuffer, string) {
		cmd := exec.Command(mqbcBin, "run", "--log-level", "info", "--metrics-addr", "127.0.0.1:0", "r.mqb")
		cmd.Dir = dir
		errb := &syncBuffer{}
		cmd.Stderr = errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		re := regexp.MustCompile(`url=http://(127\.0\.0\.1:[0-9]+)/metrics`)
		var base string
		if !waitUntil(30*time.Second, func() bool {
			m := re.FindStringSubmatch(errb.String())
			if m != nil {
				base = "http://" + m[1]
			}
			return m != nil
		}) {
			t.Fatalf("no metrics address logged in 30 s:\n%s", errb.String())
		}
		return cmd, errb, base
	}

	// Starting: a Kafka source whose broker accepts the connection and
	// never answers, so the source is still opening.
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	dead := ln.Addr().String()
	write(t, dir, "r.mqb", "route r {\n  from kafka { url = \""+dead+"\", topic = \"t\", group_id = \"g\" }\n  to file { path = \"out.jsonl\" }\n}\n")
	cmd, _, base := start(dir)
	if code, body := probe(base + "/healthz"); code != http.StatusOK || !strings.Contains(body, "r: starting") {
		t.Errorf("/healthz while starting: %d %q", code, body)
	}
	if code, body := probe(base + "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "r: starting") {
		t.Errorf("/readyz while starting: %d %q, want 503 naming r starting", code, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	// Ready: a subscribed file, open and waiting for lines.
	dir = t.TempDir()
	write(t, dir, "in.jsonl", "{\"a\":1}\n")
	write(t, dir, "r.mqb", "route r {\n  from file { path = \"in.jsonl\", mode = subscribe }\n  to file { path = \"out.jsonl\" }\n}\n")
	cmd, errb, base := start(dir)
	var body string
	if !waitUntil(30*time.Second, func() bool {
		var code int
		code, body = probe(base + "/readyz")
		return code == http.StatusOK
	}) {
		t.Fatalf("/readyz never 200: last %q\nstderr:\n%s", body, errb.String())
	}
	if !strings.Contains(body, "r: ready") {
		t.Errorf("/readyz body %q", body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitOK {
		t.Errorf("exit %d after SIGTERM of a subscription\nstderr:\n%s", code, errb.String())
	}
}
