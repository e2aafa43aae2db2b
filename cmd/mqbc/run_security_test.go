package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Secrets used by the tests below: one written into a URL, one supplied by
// env(). Neither may appear in anything mqbc emits.
const (
	urlSecret = "urlPW-7c1e2b9d"
	envSecret = "envPW-9f3a51c0"
	envName   = "MQB_TEST_SECRET"
)

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// grepSecrets fails the test for every secret found in text (what is where).
func grepSecrets(t *testing.T, where, text string) {
	t.Helper()
	for _, s := range []string{urlSecret, envSecret} {
		if i := strings.Index(text, s); i >= 0 {
			lo, hi := max(0, i-120), min(len(text), i+len(s)+40)
			t.Errorf("secret %q leaks into %s: …%s…", s, where, text[lo:hi])
		}
	}
}

// grepTree greps every file under dir except the .mqb sources, which are
// the user's own and hold the URL secret by design.
func grepTree(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".mqb") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("read %s: %v", path, err)
			return nil
		}
		grepSecrets(t, "file "+path, string(data))
		return nil
	})
}

// mqbcEnv runs the binary in dir with the env secret set.
func mqbcEnv(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	t.Setenv(envName, envSecret)
	return mqbc(t, dir, args...)
}

// buildOutputs runs every command that prints or writes a plan and greps
// their output and the plan file.
func buildOutputs(t *testing.T, dir, file string) {
	t.Helper()
	for _, args := range [][]string{
		{"build", "-o", "plan.json", file},
		{"build", "--format", "json", file},
		{"build", file},
		{"graph", file},
		{"graph", "--format", "mermaid", file},
	} {
		out, errOut, code := mqbcEnv(t, dir, args...)
		if code != 0 {
			t.Fatalf("mqbc %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		grepSecrets(t, "stdout of mqbc "+strings.Join(args, " "), out)
		grepSecrets(t, "stderr of mqbc "+strings.Join(args, " "), errOut)
	}
	plan, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	grepSecrets(t, "plan.json", string(plan))
}

// Routes whose sink cannot be reached fail at start-up with an error that
// names the route, and neither the URL password nor the env() secret is in
// the plan, the logs or the error.
func TestRunSecretsInFailingRoutes(t *testing.T) {
	port := closedPort(t)
	sinks := map[string]string{
		"nats_url":       fmt.Sprintf(`nats { url = "nats://mqb:%s@127.0.0.1:%d", subject = "orders", no_jetstream = true }`, urlSecret, port),
		"nats_env":       fmt.Sprintf(`nats { url = "nats://mqb:${env("%s")}@127.0.0.1:%d", subject = "orders", no_jetstream = true }`, envName, port),
		"kafka_env":      fmt.Sprintf(`kafka { url = "kafka://mqb:${env("%s")}@127.0.0.1:%d", topic = "orders" }`, envName, port),
		"clickhouse_env": fmt.Sprintf(`clickhouse { url = "clickhouse://default:${env("%s")}@127.0.0.1:%d/db", table = "orders" }`, envName, port),
		"nats_token":     fmt.Sprintf(`nats { url = "nats://%s@127.0.0.1:%d", subject = "orders", no_jetstream = true }`, urlSecret, port),
		"kafka_url":      fmt.Sprintf(`kafka { url = "kafka://mqb:%s@127.0.0.1:%d", topic = "orders" }`, urlSecret, port),
		"clickhouse_url": fmt.Sprintf(`clickhouse { url = "clickhouse://default:%s@127.0.0.1:%d/db", table = "orders" }`, urlSecret, port),
		"postgres_url": fmt.Sprintf(`sql {
    url = "postgres://mqb:%s@127.0.0.1:%d/shop?sslmode=disable"
    insert_query = "INSERT INTO orders (id) VALUES (${meta[\"mqb.id\"]}) ON CONFLICT (id) DO NOTHING"
  }`, urlSecret, port),
		"postgres_env": fmt.Sprintf(`sql {
    url = "postgres://mqb:${env("%s")}@127.0.0.1:%d/shop?sslmode=disable"
    insert_query = "INSERT INTO orders (id) VALUES (${meta[\"mqb.id\"]}) ON CONFLICT (id) DO NOTHING"
  }`, envName, port),
		"postgres_query": fmt.Sprintf(`sql {
    url = "postgres://127.0.0.1:%d/shop?user=mqb&password=%s&sslmode=disable"
    insert_query = "INSERT INTO orders (id) VALUES (${meta[\"mqb.id\"]}) ON CONFLICT (id) DO NOTHING"
  }`, port, urlSecret),
		"mysql_env": fmt.Sprintf(`sql {
    url = "mysql://mqb:${env("%s")}@127.0.0.1:%d/shop"
    insert_query = "INSERT INTO orders (id) VALUES (${meta[\"mqb.id\"]}) ON DUPLICATE KEY UPDATE id = id"
  }`, envName, port),
	}
	for name, sink := range sinks {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "in.jsonl", `{"order_id":"o-1"}`+"\n")
			src := fmt.Sprintf("route %s {\n  from file { path = \"in.jsonl\" }\n  id payload.order_id\n  to %s\n}\n", name, sink)
			write(t, dir, "r.mqb", src)
			buildOutputs(t, dir, "r.mqb")
			out, errOut, code := mqbcEnv(t, dir, "run", "--log-level", "debug", "--log-format", "json", "r.mqb")
			if code == 0 {
				t.Fatalf("run into an unreachable sink succeeded:\n%s%s", out, errOut)
			}
			if !strings.Contains(errOut, "route "+name) {
				t.Errorf("the error does not name the route:\n%s", errOut)
			}
			t.Logf("error: %s", strings.TrimSpace(errOut[max(0, len(errOut)-400):]))
			grepSecrets(t, "stdout of mqbc run", out)
			grepSecrets(t, "stderr of mqbc run", errOut)
			grepTree(t, dir)
		})
	}
}

// startAuthNATS starts a NATS server that accepts only user mqb with the
// env secret as password.
func startAuthNATS(t *testing.T) string {
	t.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, Username: "mqb", Password: envSecret, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}
	t.Cleanup(srv.Shutdown)
	return srv.Addr().String()
}

var metricRE = regexp.MustCompile(`(?m)^mqb_records_out_total\{route="publish"\} (\d+)`)

// A working run with secrets in its URLs: every route loads its data, and
// nothing it prints, logs, serves as metrics or writes (DLQ metadata, the
// stores, the sink files) holds a secret. What the sinks and stores write
// is private to the user: files 0600, directories 0700.
func TestRunSecretsAndFileModes(t *testing.T) {
	// A permissive umask, inherited by mqbc: the modes checked below must
	// come from mqbc, not from a strict umask of whoever runs the test.
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	natsAddr := startAuthNATS(t)
	nc, err := nats.Connect("nats://"+natsAddr, nats.UserInfo("mqb", envSecret))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("orders")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()

	dir := t.TempDir()
	const n = 200
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, `{"order_id":"o-%d","body":"b%d"}`+"\n", i, i)
	}
	in.WriteString("not json at all\n") // one record for each DLQ
	write(t, dir, "in.jsonl", in.String())
	src := fmt.Sprintf(`route load {
  from file { path = "in.jsonl" }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://out/dedup", ttl = 1h, keep = true }
  dlq { to file { path = "out/dlq/load.jsonl" } }
  to sql {
    url          = "sqlite://out/db/orders.db?password=${env(\"%s\")}"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, body TEXT)"
    insert_query = "INSERT INTO orders (id, body) VALUES (${meta[\"mqb.id\"]}, ${payload.body}) ON CONFLICT (id) DO NOTHING"
  }
}

route parts {
  from file { path = "in.jsonl", checkpoint_store = "pebble://out/state/parts" }
  dlq { to file { path = "out/dlq/parts.jsonl" } }
  to file { path = "out/parts", name_by = source_position }
}

route lines {
  from file { path = "in.jsonl", checkpoint_store = "pebble://out/state/lines" }
  dlq { to file { path = "out/dlq/lines.jsonl" } }
  to file { path = "out/lines/lines.jsonl" }
}

route objects {
  from file { path = "in.jsonl", checkpoint_store = "pebble://out/state/objects" }
  dlq { to file { path = "out/dlq/objects.jsonl" } }
  to object_store { url = "file://out/objects/orders" }
}

# Follows the file, so the process stays up for the metrics to be read.
route publish {
  from file { path = "in.jsonl", mode = group_subscribe, checkpoint_store = "pebble://out/state/publish" }
  id payload.order_id
  dlq { to file { path = "out/dlq/publish.jsonl" } }
  to nats { url = "nats://mqb:${env(\"%s\")}@%s", subject = "orders", no_jetstream = true }
}
`, envName, envName, natsAddr)
	write(t, dir, "r.mqb", src)
	buildOutputs(t, dir, "r.mqb")

	t.Setenv(envName, envSecret)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", closedPort(t))
	cmd := exec.Command(mqbcBin, "run", "--log-level", "debug", "--log-format", "json", "--metrics-addr", metricsAddr, "r.mqb")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var metrics string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			metrics = string(b)
			if m := metricRE.FindStringSubmatch(metrics); m != nil {
				if v, _ := strconv.Atoi(m[1]); v >= n {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("route publish did not publish %d records in 30s; metrics:\n%s\nstderr:\n%s", n, metrics, tail(stderr.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mqbc run: %v\n%s", err, tail(stderr.String(), 3000))
	}
	for _, r := range []string{"load", "parts", "lines", "objects", "publish"} {
		if !strings.Contains(stdout.String(), r+": in ") {
			t.Errorf("no stats for route %s:\n%s", r, stdout.String())
		}
	}
	if !strings.Contains(stdout.String(), fmt.Sprintf("load: in %d, out %d, deduplicated 0, filtered 0, dead-lettered 1", n+1, n)) {
		t.Errorf("route load did not load everything:\n%s", stdout.String())
	}
	got := 0
	for {
		if _, err := sub.NextMsg(time.Second); err != nil {
			break
		}
		got++
	}
	if got != n {
		t.Errorf("NATS received %d messages, want %d", got, n)
	}
	if !strings.Contains(stderr.String(), `"level":"DEBUG"`) && !strings.Contains(stderr.String(), `"level":"INFO"`) {
		t.Errorf("no logs at debug level on stderr:\n%s", tail(stderr.String(), 2000))
	}
	grepSecrets(t, "stdout of mqbc run", stdout.String())
	grepSecrets(t, "stderr of mqbc run", stderr.String())
	grepSecrets(t, "metrics", metrics)
	grepTree(t, dir)
	checkPrivateModes(t, filepath.Join(dir, "out"), "db/orders.db", "dlq/load.jsonl", "parts/part-*",
		"lines/lines.jsonl", "objects/orders/*", "dedup/MANIFEST-*", "state/parts/*")
	checkPrivateModes(t, filepath.Join(dir, ".mqb"), "state/MANIFEST-*") // the default checkpoint store
}

// checkPrivateModes walks root and fails on any file that is not 0600 or
// directory that is not 0700, whatever the umask of the process was; want
// are globs that must match something, so the walk sees what it is about.
func checkPrivateModes(t *testing.T, root string, want ...string) {
	t.Helper()
	kinds := map[string]int{}
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case fi.IsDir():
			kinds["dir"]++
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("directory %s has mode %o, want 0700", rel, fi.Mode().Perm())
			}
		case fi.Mode().IsRegular():
			kinds["file"]++
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("file %s has mode %o, want 0600", rel, fi.Mode().Perm())
			}
		}
		return nil
	})
	for _, glob := range want {
		if m, _ := filepath.Glob(filepath.Join(root, glob)); len(m) == 0 {
			t.Errorf("nothing at %s: the route did not write what the mode check is about", glob)
		}
	}
	t.Logf("checked %v", kinds)
}
