//go:build chaos

package chaos

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
)

// Faults beyond the process that runtime tests already cover, each with a
// real server stopped or killed mid-run and restarted (retries with
// backoff, nothing lost, progress resumes), are not repeated here:
//
//	Postgres, MariaDB   runtime.TestSQLServerSinkServerRestart
//	NATS JetStream      connector/nats.TestNATSSinkServerRestart
//	Kafka broker        connector/kafka.TestKafkaSinkBrokerRestart (in-process);
//	                    TestKafkaBrokerProcessRestart below (both processes)
//	GCS, S3 emulators   connector/objectstore.TestObjectStoreOutage
//	ClickHouse          connector/clickhouse.TestClickHouseSinkServerKilled
//
// Added here: the broker as a process of its own, and the disk under the
// Pebble stores.

// mountTmpfs mounts a tmpfs of size on dir (root only; the test skips
// otherwise) and unmounts it when the test ends.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (file permissions do not stop root, a full or read-only file system does)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}

func remount(t *testing.T, dir, opts string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -o remount,%s %s: %v: %s", opts, dir, err, out)
	}
}

// The Pebble stores (dedup and checkpoint) sit on a small file system that
// fills up mid-run: the process stops with one line naming the store and
// the cause (not a Go stack trace). On a read-only file system the route
// does not start, with a clear error. Once space is back, the next run
// resumes from the last checkpoint and every record is in the sink once.
func TestPebbleStoreDiskFullAndReadOnly(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	mountTmpfs(t, state, "3m")
	const n = 300000
	writeOrders(t, filepath.Join(dir, "in.jsonl"), n, 7)
	writeFile(t, filepath.Join(dir, "full.mqb"), pebbleRoute("full"))
	run := func() (string, string, int) {
		cmd := exec.Command(mqbcBin, "run", "full.mqb")
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		return stdout.String(), stderr.String(), code
	}

	// 1. The disk fills up mid-run.
	out, errOut, code := run()
	t.Logf("disk full: exit %d\n%s%s", code, out, tail(errOut, 1500))
	if code == 0 {
		t.Fatalf("a run whose stores do not fit on a 3 MiB file system succeeded:\n%s", out)
	}
	if strings.Contains(errOut, "goroutine ") || code == 2 {
		t.Errorf("the process died of a panic (exit %d) instead of stopping with an error:\n%s", code, tail(errOut, 3000))
	}
	if !strings.Contains(errOut, "no space left on device") || !strings.Contains(errOut, state) {
		t.Errorf("the error does not say the store %s is full:\n%s", state, tail(errOut, 3000))
	}
	rows := countOrders(t, filepath.Join(dir, "out.db"))
	if rows == 0 || rows >= n {
		t.Errorf("the sink holds %d of %d rows: the disk should have filled up mid-run", rows, n)
	}

	// 2. The file system is read-only.
	remount(t, state, "ro")
	out, errOut, code = run()
	t.Logf("read-only: exit %d\n%s%s", code, out, tail(errOut, 1500))
	if code != 1 {
		t.Errorf("a run on a read-only store exits %d, want 1", code)
	}
	if strings.Contains(errOut, "goroutine ") {
		t.Errorf("the process died of a panic instead of stopping with an error:\n%s", tail(errOut, 3000))
	}
	if !strings.Contains(errOut, "read-only file system") || !strings.Contains(errOut, "route full") {
		t.Errorf("the error does not name the route and the read-only store:\n%s", tail(errOut, 3000))
	}

	// 3. Room again: the run resumes and ends with every record once.
	remount(t, state, "rw,size=256m")
	out, errOut, code = run()
	if code != 0 {
		t.Fatalf("the run after the disk has room again: exit %d\n%s%s", code, out, tail(errOut, 3000))
	}
	t.Logf("resumed: %s", out)
	if !strings.Contains(out, "full: in ") {
		t.Errorf("no stats line:\n%s", out)
	}
	if got := countOrders(t, filepath.Join(dir, "out.db")); got != n {
		t.Errorf("the sink holds %d rows, want %d", got, n)
	}
	_, distinct, sum := orderTotals(t, filepath.Join(dir, "out.db"))
	if distinct != n || sum != int64(n)*(n-1)/2 {
		t.Errorf("%d distinct ids, amounts sum to %d: want %d and %d", distinct, sum, n, int64(n)*(n-1)/2)
	}
}

// writeOrders writes orders 0 to n-1 to path as JSON lines: order i has
// id "o-" and i padded with zeros to digits digits, and amount i.
func writeOrders(t *testing.T, path string, n, digits int) {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"order_id":"o-%0*d","amount":%d}`+"\n", digits, i, i)
	}
	writeFile(t, path, b.String())
}

// pebbleRoute is route name of the disk fault tests: file → dedup →
// SQLite, with the file checkpoint and the dedup store in Pebble stores
// under state/.
func pebbleRoute(name string) string {
	return `route ` + name + ` {
  from file { path = "in.jsonl", checkpoint_store = "pebble://state/checkpoint" }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h, keep = true } # the store under test
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"
    insert_query = """INSERT INTO orders (id, amount) VALUES (${meta["mqb.id"]}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"""
  }
}
`
}

func countOrders(t *testing.T, db string) int {
	t.Helper()
	h := openSQLite(t, db)
	defer h.Close()
	var n int
	if err := h.QueryRow(`SELECT count(*) FROM orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// orderTotals counts the rows and distinct ids of table orders in the
// SQLite database db and sums their amounts (the table must not be empty).
func orderTotals(t *testing.T, db string) (rows, distinct, sum int64) {
	t.Helper()
	h := openSQLite(t, db)
	defer h.Close()
	if err := h.QueryRow(`SELECT count(*), count(DISTINCT id), sum(amount) FROM orders`).Scan(&rows, &distinct, &sum); err != nil {
		t.Fatal(err)
	}
	return rows, distinct, sum
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// The Kafka-protocol broker runs as a process of its own (mqb-testbroker)
// and is stopped for three seconds while mqbc — also a real process — is
// writing to it: the route retries with backoff, resumes when the broker is
// back, and every order is in the topic (at-least-once: repeats allowed).
// connector/kafka.TestKafkaSinkBrokerRestart does the same with the in-process
// broker; here neither side shares a process with the test.
func TestKafkaBrokerProcessRestart(t *testing.T) {
	k := testsrv.NewKafkaProcess(t, kafkabroker.Config{Topics: []string{"orders:2"}})
	dir := t.TempDir()
	const n = 150000
	writeOrders(t, filepath.Join(dir, "in.jsonl"), n, 6)
	src := fmt.Sprintf(`route chaos {
  batch_size = 500
  from file { path = "in.jsonl" }
  id payload.order_id
  retry { attempts = 200, backoff = 100ms, max_backoff = 500ms }
  to kafka { url = %q, topic = "orders", partition_key = "${meta[\"mqb.id\"]}" }
}
`, k.Brokers())
	writeFile(t, filepath.Join(dir, "chaos.mqb"), src)
	r := startMidRun(t, dir, 100*time.Millisecond, "the broker was stopped")
	const downtime = 3 * time.Second
	stopped := time.Now()
	k.Restart(t, downtime)
	if err := r.waitExit(t, 3*time.Minute, "the route did not finish within 3 minutes of the broker's restart"); err != nil {
		t.Fatalf("mqbc run: %v\n%s%s", err, r.stdout.String(), tail(r.stderrText(), 3000))
	}
	t.Logf("finished %v after the broker stopped: %s", time.Since(stopped).Round(time.Millisecond), r.stdout.String())
	m := statsRE.FindStringSubmatch(r.stdout.String())
	if m == nil || m[2] != strconv.Itoa(n) || m[5] != "0" || m[6] != "0" {
		t.Errorf("want in %d = out %d, nothing dead-lettered or dropped: %v", n, n, m)
	}
	// The outage must have hit the run: it lasted longer than the downtime.
	if e := regexp.MustCompile(`errors \d+ \(([^)]+)\)`).FindStringSubmatch(r.stdout.String()); e == nil {
		t.Errorf("no elapsed time in %q", r.stdout.String())
	} else if d, err := time.ParseDuration(e[1]); err != nil || d < downtime {
		t.Fatalf("the run took %s, less than the broker's %v downtime: it ended before the outage (make the input longer)", e[1], downtime)
	}
	got := countKafka(t, k.Brokers(), "orders", 2)
	lost, dups := 0, 0
	for i := 0; i < n; i++ {
		c := got[fmt.Sprintf("o-%06d", i)]
		if c == 0 {
			lost++
		}
		dups += max(0, c-1)
	}
	t.Logf("topic holds %d distinct orders, %d repeats", len(got), dups)
	if lost > 0 {
		t.Errorf("%d of %d orders lost across the broker's restart", lost, n)
	}
}

// The file system under the Pebble stores turns read-only mid-run, as ext4
// does on an I/O error with errors=remount-ro (forced here through
// /sys/fs/ext4/DEV/trigger_fs_error, which works with files open, unlike a
// remount): the process stops with an error naming the read-only store,
// not a stack trace. After fsck and a read-write mount the next run resumes
// from what the stores hold and the sink has every record once.
func TestPebbleStoreReadOnlyMidRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to loop-mount an ext4 image")
	}
	for _, tool := range []string{"mkfs.ext4", "e2fsck", "losetup", "findmnt"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	img, state := filepath.Join(dir, "state.img"), filepath.Join(dir, "state")
	sh := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 256<<20); err != nil {
		t.Fatal(err)
	}
	sh("mkfs.ext4", "-q", "-F", img)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop,errors=remount-ro", img, state).CombinedOutput(); err != nil {
		t.Skipf("cannot loop-mount an ext4 image: %v: %s", err, out)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			exec.Command("umount", state).Run()
		}
	})
	src, err := exec.Command("findmnt", "-n", "-o", "SOURCE", state).Output()
	if err != nil {
		t.Fatal(err)
	}
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(strings.TrimSpace(string(src))), "trigger_fs_error")
	if _, err := os.Stat(trigger); err != nil {
		t.Skipf("no %s: %v", trigger, err)
	}

	const n = 400000
	writeOrders(t, filepath.Join(dir, "in.jsonl"), n, 7)
	writeFile(t, filepath.Join(dir, "chaos.mqb"), pebbleRoute("chaos"))

	r := startMidRun(t, dir, 150*time.Millisecond, "the file system turned read-only")
	if err := os.WriteFile(trigger, []byte("1"), 0o200); err != nil {
		t.Fatalf("trigger a file system error: %v", err)
	}
	runErr := r.waitExit(t, time.Minute, "the route did not stop within a minute of its stores going read-only")
	errOut := r.stderrText()
	t.Logf("read-only mid-run: %v\n%s%s", runErr, r.stdout.String(), tail(errOut, 1500))
	if runErr == nil {
		t.Errorf("the run succeeded although its stores went read-only mid-run")
	}
	if strings.Contains(errOut, "goroutine ") {
		t.Errorf("the process died of a panic instead of stopping with an error:\n%s", tail(errOut, 3000))
	}
	// The write that meets the error gets EIO; later ones, once ext4 has
	// remounted read-only, EROFS: which one the store sees first depends
	// on timing, and so does who meets it first (a write of mqb's, or
	// Pebble's own flush, whose message may name no file). Either way the
	// line names the store's directory itself, not just some file in it.
	namesStore := regexp.MustCompile(`(pebble|dedup|checkpoint) store ` + regexp.QuoteMeta(state) + `/(dedup|checkpoint)[:\s]`)
	if !(strings.Contains(errOut, "read-only file system") || strings.Contains(errOut, "input/output error")) || !namesStore.MatchString(errOut) {
		t.Errorf("the error does not name the failed store (%s/dedup or %s/checkpoint) and the cause:\n%s", state, state, tail(errOut, 3000))
	}
	before := countOrders(t, filepath.Join(dir, "out.db"))

	// Repair and remount, as an operator would, then resume.
	sh("umount", state)
	mounted = false
	if out, err := exec.Command("e2fsck", "-fy", img).CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 { // 1: errors corrected
			t.Fatalf("e2fsck: %v: %s", err, out)
		}
	}
	sh("mount", "-o", "loop", img, state)
	mounted = true
	r = startMqbc(t, dir, nil)
	if err := r.waitExit(t, 2*time.Minute, "the resumed run did not end within 2 minutes"); err != nil {
		t.Fatalf("the resumed run: %v\n%s%s", err, r.stdout.String(), tail(r.stderrText(), 3000))
	}
	t.Logf("resumed with %d of %d rows in the sink: %s", before, n, r.stdout.String())
	rows, distinct, sum := orderTotals(t, filepath.Join(dir, "out.db"))
	if rows != n || distinct != n || sum != int64(n)*(n-1)/2 {
		t.Errorf("%d rows, %d distinct ids, amounts sum to %d: want %d, %d and %d", rows, distinct, sum, n, n, int64(n)*(n-1)/2)
	}
}
