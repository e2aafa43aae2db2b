package main

import (
	"bytes"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
)

// TestKafkaExample runs examples/kafka as its comment says, in a copy,
// against a broker that wants SCRAM-SHA-256: publish the export, load it
// from a consumer group into SQLite, stop with SIGINT. A second run moves
// nothing new. The password, read from the environment, shows nowhere.
func TestKafkaExample(t *testing.T) {
	const password = "example-password"
	c, err := kafkabroker.Start(kafkabroker.Config{Topics: []string{"orders:3"},
		Users: []kafkabroker.User{{Mechanism: "SCRAM-SHA-256", Name: "mqb", Password: password}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := strings.Join(c.ListenAddrs(), ",")

	dir := t.TempDir()
	for _, name := range []string{"kafka.mqb", "orders.jsonl"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", "kafka", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "kafka.mqb" {
			data = bytes.ReplaceAll(data, []byte("127.0.0.1:9092"), []byte(addr))
		}
		write(t, dir, name, string(data))
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "orders.jsonl"))), "\n") {
		ids[strings.Split(line, `"`)[3]] = true
	}

	db := filepath.Join(dir, "out", "orders.db")
	rows := func() int {
		conn, err := sql.Open("sqlite3", "file:"+db+"?mode=ro&_busy_timeout=5000")
		if err != nil {
			return -1
		}
		defer conn.Close()
		var n int
		if err := conn.QueryRow(`SELECT count(*) FROM orders`).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	runOnce := func() string {
		cmd := exec.Command(mqbcBin, "run", "--log-level", "info", "kafka.mqb")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KAFKA_PASSWORD="+password)
		var out, errb syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Stop it once the file route has read its file to the end (a
		// drain before that is an interrupted run, exit 3) and the rows
		// are in.
		deadline := time.Now().Add(time.Minute)
		for (rows() < len(ids) || !strings.Contains(errb.String(), `msg="route ended" route=publish`)) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // anything more would land now
		cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("mqbc run: %v\n%s\n%s", err, out.String(), errb.String())
		}
		all := out.String() + errb.String()
		if strings.Contains(all, password) {
			t.Errorf("the password shows in the output:\n%s", all)
		}
		return out.String()
	}

	first := runOnce()
	if n := rows(); n != len(ids) {
		t.Fatalf("orders table holds %d rows, want %d\n%s", n, len(ids), first)
	}
	if !strings.Contains(first, "load: effectively-once") || !strings.Contains(first, "publish: in 12, out 12") {
		t.Errorf("first run:\n%s", first)
	}
	second := runOnce()
	if !strings.Contains(second, "publish: in 0, out 0") || !strings.Contains(second, "load: in 0, out 0") {
		t.Errorf("second run moved records:\n%s", second)
	}
	if n := rows(); n != len(ids) {
		t.Errorf("after the second run the table holds %d rows, want %d", n, len(ids))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
