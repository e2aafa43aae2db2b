package clickhouse

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// BenchmarkClickHouseVsClient loads the same 200k-row JSONEachRow file
// into a fresh ReplacingMergeTree table twice per iteration: once with mqb
// (file → clickhouse, native protocol, the payload's fields as columns) and
// once with clickhouse-client (INSERT … FORMAT JSONEachRow from stdin, the
// same server version). It reports the median records/s and MB/s of each
// and mqb's share of the client's rate. Skipped without clickhouse-server
// (testsrv) or clickhouse-client.
//
//	go test ./runtime -run '^$' -bench ClickHouseVsClient -benchtime 5x
func BenchmarkClickHouseVsClient(b *testing.B) {
	const n = 200000
	client, err := exec.LookPath("clickhouse-client")
	if err != nil {
		b.Skip("clickhouse-client not installed (Debian package clickhouse-client, same version as the server)")
	}
	srv := testsrv.SharedClickHouse(b)
	db := srv.NewDatabase(b)
	host, port, _ := strings.Cut(srv.NativeAddr(), ":")
	chq := func(q string, stdin *os.File) error {
		cmd := exec.Command(client, "--host", host, "--port", port, "--database", db.Name, "--query", q)
		cmd.Stdin = stdin
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("clickhouse-client %q: %v: %s", q, err, out)
		}
		return nil
	}
	count := func(table string) string {
		out, err := exec.Command(client, "--host", host, "--port", port, "--database", db.Name,
			"--query", "SELECT count() FROM "+table).Output()
		if err != nil {
			b.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	create := func(table string) {
		if err := chq("CREATE TABLE "+table+" (id String, amount Int64, body String, version UInt64) ENGINE = ReplacingMergeTree(version) ORDER BY id", nil); err != nil {
			b.Fatal(err)
		}
	}

	dir := b.TempDir()
	input := filepath.Join(dir, "orders.jsonl")
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `{"id":"o-%d","amount":%d,"body":"order number %d with some padding text","version":%d}`+"\n", i, i, i, i+1)
	}
	if err := os.WriteFile(input, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	size := int64(sb.Len())
	opts := runtest.Options()

	var mqbT, clientT []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		mt, ct := fmt.Sprintf("mqb_%d", i), fmt.Sprintf("client_%d", i)
		create(mt)
		create(ct)
		e := plantest.Env{Input: input, State: filepath.Join(dir, fmt.Sprint("state", i)), DLQ: filepath.Join(dir, "dlq.jsonl")}
		nodes := []plan.Node{
			{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
				"path": plantest.Str(e.Input), "mode": plantest.Enum("consume"), "checkpoint_store": plantest.Str("pebble://" + e.State)}},
			{ID: "n1", Role: plan.RoleSink, Kind: "clickhouse", Side: plan.SideOutput, Attrs: map[string]plan.Value{
				"url": plantest.Str(db.URL), "table": plantest.Str(mt), "version": plantest.Expr("payload.version")}},
		}
		p := plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "bench", Guarantee: plan.EffectivelyOnce,
			Concurrency: 2, BatchSize: 8192, Nodes: nodes, Edges: plantest.Chain(nodes)}}}
		b.StartTimer()

		start := time.Now()
		st, err := runtime.Run(context.Background(), p, opts)
		if err != nil {
			b.Fatal(err)
		}
		mqbT = append(mqbT, time.Since(start))
		if rs := st.Routes[0]; rs.Out != n {
			b.Fatalf("mqb: %+v, want out %d", rs, n)
		}

		f, err := os.Open(input)
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		err = chq("INSERT INTO "+ct+" FORMAT JSONEachRow", f)
		clientT = append(clientT, time.Since(start))
		f.Close()
		if err != nil {
			b.Fatal(err)
		}

		b.StopTimer()
		if got := count(mt); got != fmt.Sprint(n) {
			b.Fatalf("mqb table holds %s rows, want %d", got, n)
		}
		if got := count(ct); got != fmt.Sprint(n) {
			b.Fatalf("client table holds %s rows, want %d", got, n)
		}
		b.StartTimer()
	}
	b.StopTimer()
	med := func(ds []time.Duration) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2].Seconds()
	}
	m, c := med(mqbT), med(clientT)
	b.ReportMetric(n/m, "mqb-records/s")
	b.ReportMetric(float64(size)/m/1e6, "mqb-MB/s")
	b.ReportMetric(n/c, "client-records/s")
	b.ReportMetric(float64(size)/c/1e6, "client-MB/s")
	b.ReportMetric(c/m, "mqb/client")
	b.Logf("%d rows, %.1f MB; medians of %d: mqb %v, clickhouse-client %v (server %s)", n, float64(size)/1e6, b.N,
		time.Duration(m*1e9).Round(time.Millisecond), time.Duration(c*1e9).Round(time.Millisecond), srv.Version(b))
}
