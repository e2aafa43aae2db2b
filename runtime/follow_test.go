package runtime

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// waitLines waits until path has n lines.
func waitLines(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(data) > 0 && len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d lines after 10s, want %d: %q", path, len(lines), n, lines)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSubscribeModes(t *testing.T) {
	d := t.TempDir()
	in, out := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl")
	appendFile(t, in, `{"old": 1}`+"\n")
	start := func(mode string) *backgroundRun {
		p := fileRoute("follow", in, out, "", filepath.Join(d, "state"))
		p.Routes[0].Nodes[0].Attrs["mode"] = enumV(mode)
		return startRun(context.Background(), p, testOptions(t))
	}

	// subscribe starts at the end of the file and follows it, joining a
	// line written in two pieces.
	r := start(modeSubscribe)
	time.Sleep(300 * time.Millisecond)
	appendFile(t, in, `{"new": 1}`+"\n"+`{"new":`)
	time.Sleep(250 * time.Millisecond)
	appendFile(t, in, ` 2}`+"\n")
	got := waitLines(t, out, 2)
	r.stop(t)
	if strings.Join(got, "|") != `{"new": 1}|{"new": 2}` {
		t.Errorf("subscribe wrote %q", got)
	}

	// group_subscribe reads from the stored offset (none yet: the start),
	// and a second run resumes after what the first committed.
	os.Remove(out)
	r = start(modeGroupSubscribe)
	waitLines(t, out, 3)
	if rs := r.stop(t).Route("follow"); rs.In != 3 {
		t.Errorf("first group_subscribe run read %d, want 3", rs.In)
	}
	appendFile(t, in, `{"later": 1}`+"\n")
	r = start(modeGroupSubscribe)
	got = waitLines(t, out, 4)
	time.Sleep(200 * time.Millisecond)
	if rs := r.stop(t).Route("follow"); rs.In != 1 || got[3] != `{"later": 1}` {
		t.Errorf("resumed group_subscribe read %d, output %q", rs.In, got)
	}
}

func TestMetricsAndProgress(t *testing.T) {
	e := newTestEnv(t)
	genDataset(t, e.input, 3000, 4)
	reg := prometheus.NewRegistry()
	var progress strings.Builder
	opts := testOptions(t)
	opts.Registerer = reg
	opts.Progress = &progress
	st, err := Run(context.Background(), sqlitePlan(e, 100, 1), opts)
	if err != nil {
		t.Fatal(err)
	}
	rs := st.Route("orders")
	if !strings.Contains(progress.String(), "orders: 3000 records") || !strings.Contains(progress.String(), "100.0%") {
		t.Errorf("progress %q", progress.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := ServeMetrics(ctx, "127.0.0.1:0", reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`mqb_records_in_total{route="orders"} %d`, rs.In),
		fmt.Sprintf(`mqb_records_out_total{route="orders"} %d`, rs.Out),
		fmt.Sprintf(`mqb_records_deduplicated_total{route="orders"} %d`, rs.Deduplicated),
		fmt.Sprintf(`mqb_records_dead_lettered_total{route="orders"} %d`, rs.DeadLettered),
		`mqb_commit_lag_records{route="orders"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// A second run on the same registerer reuses the collectors.
	if _, err := Run(context.Background(), sqlitePlan(e, 100, 1), opts); err != nil {
		t.Fatal(err)
	}
}

func TestSubscribeLongLineInPieces(t *testing.T) {
	d := t.TempDir()
	in, out, dlq := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl"), filepath.Join(d, "dlq.jsonl")
	appendFile(t, in, "")
	p := fileRoute("long", in, out, dlq, filepath.Join(d, "state"))
	p.Routes[0].Nodes[0].Attrs["mode"] = enumV(modeSubscribe)
	p.Routes[0].Nodes[0].Attrs["max_record_bytes"] = intV(50)
	r := startRun(context.Background(), p, testOptions(t))
	time.Sleep(300 * time.Millisecond)
	appendFile(t, in, `{"a": "`+strings.Repeat("x", 40))
	time.Sleep(250 * time.Millisecond)
	appendFile(t, in, strings.Repeat("y", 40)+`"}`+"\n"+`{"short": 1}`+"\n")
	got := waitLines(t, out, 1)
	waitLines(t, dlq, 1)
	time.Sleep(100 * time.Millisecond)
	st := r.stop(t)
	if len(got) != 1 || got[0] != `{"short": 1}` {
		t.Errorf("output %q", got)
	}
	dl := readLines(t, dlq)
	if len(dl) != 1 || !strings.Contains(dl[0], "exceeds max_record_bytes") || !strings.Contains(dl[0], "record of 89 bytes") {
		t.Errorf("dlq %q", dl)
	}
	if rs := st.Route("long"); rs.In != 2 || rs.Out != 1 || rs.DeadLettered != 1 {
		t.Errorf("stats %+v", rs)
	}
}
