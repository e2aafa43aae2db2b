package main

import (
	"regexp"
	"testing"
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
