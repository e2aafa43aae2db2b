package testsrv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
)

// KafkaProcess is cmd/mqb-testbroker running as a separate process, for
// crash tests where the broker must die (or survive) independently of the
// code under test. It keeps its state in a data dir, so Start after Stop
// carries on with the same port, topics, records and group offsets; Kill
// loses what the broker had not yet written out, as a crash would.
type KafkaProcess struct {
	cfg kafkabroker.Config
	dir string

	mu      sync.Mutex
	proc    *process
	brokers string
}

var (
	testbrokerOnce sync.Once
	testbrokerBin  string
	testbrokerErr  error
)

// testbrokerBinary builds cmd/mqb-testbroker once per test binary with the
// go command (the build cache makes later builds quick).
func testbrokerBinary() (string, error) {
	testbrokerOnce.Do(func() {
		var dir string
		if dir, testbrokerErr = rootDir(); testbrokerErr != nil {
			return
		}
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
			testbrokerErr = fmt.Errorf("find the mqb module to build mqb-testbroker: %v", err)
			return
		}
		modRoot := filepath.Dir(strings.TrimSpace(string(gomod)))
		testbrokerBin = filepath.Join(dir, "mqb-testbroker")
		cmd := exec.Command("go", "build", "-o", testbrokerBin, "./cmd/mqb-testbroker")
		cmd.Dir = modRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			testbrokerErr = fmt.Errorf("go build ./cmd/mqb-testbroker: %v\n%s", err, out)
		}
	})
	return testbrokerBin, testbrokerErr
}

// NewKafkaProcess builds and starts mqb-testbroker for this test; it is
// stopped when the test ends. Without cfg.DataDir it persists to a temp
// dir.
func NewKafkaProcess(t testing.TB, cfg kafkabroker.Config) *KafkaProcess {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("testsrv: mqb-testbroker is built with the go command, not on PATH: %v", err)
	}
	dir := t.TempDir()
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(dir, "data")
	}
	k := &KafkaProcess{cfg: cfg, dir: dir}
	if err := k.start(); err != nil {
		t.Fatalf("testsrv: start mqb-testbroker: %v", err)
	}
	t.Cleanup(func() { k.stop(syscall.SIGTERM) })
	return k
}

func (k *KafkaProcess) start() error {
	bin, err := testbrokerBinary()
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.proc != nil && k.proc.running() {
		return nil
	}
	addrFile := filepath.Join(k.dir, "addr")
	os.Remove(addrFile)
	args := []string{
		"-port", strconv.Itoa(k.cfg.Port),
		"-brokers", strconv.Itoa(max(k.cfg.Brokers, 1)),
		"-partitions", strconv.Itoa(max(k.cfg.Partitions, 1)),
		"-data-dir", k.cfg.DataDir,
		"-addr-file", addrFile,
	}
	if len(k.cfg.Topics) > 0 {
		args = append(args, "-topics", strings.Join(k.cfg.Topics, ","))
	}
	p, err := startProcess(filepath.Join(k.dir, "mqb-testbroker.log"), nil, bin, args...)
	if err != nil {
		return err
	}
	k.proc = p
	var addr string
	err = p.waitReady(30*time.Second, func(context.Context) error {
		// The broker writes the file by rename once it listens.
		b, err := os.ReadFile(addrFile)
		if err != nil {
			return err
		}
		addr = strings.TrimSpace(string(b))
		return nil
	})
	if err != nil {
		return err
	}
	k.brokers = addr
	if k.cfg.Port == 0 {
		first, _, _ := strings.Cut(addr, ",")
		_, port, _ := strings.Cut(first, ":")
		k.cfg.Port, _ = strconv.Atoi(port)
	}
	return nil
}

func (k *KafkaProcess) stop(sig syscall.Signal) {
	k.mu.Lock()
	p := k.proc
	k.mu.Unlock()
	if p != nil {
		p.stop(sig, 15*time.Second)
	}
}

// Brokers is the comma-separated bootstrap list; it stays the same across
// restarts.
func (k *KafkaProcess) Brokers() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.brokers
}

// Stop stops the broker with SIGTERM: it saves its state first.
func (k *KafkaProcess) Stop(t testing.TB) {
	t.Helper()
	k.stop(syscall.SIGTERM)
}

// Kill stops the broker with SIGKILL, as a crash would.
func (k *KafkaProcess) Kill(t testing.TB) {
	t.Helper()
	k.stop(syscall.SIGKILL)
}

// Start starts a stopped broker again on the same port and data dir.
func (k *KafkaProcess) Start(t testing.TB) {
	t.Helper()
	if err := k.start(); err != nil {
		t.Fatalf("testsrv: restart mqb-testbroker: %v", err)
	}
}

// Restart stops the broker (SIGTERM), waits for downtime, and starts it
// again.
func (k *KafkaProcess) Restart(t testing.TB, downtime time.Duration) {
	t.Helper()
	k.Stop(t)
	time.Sleep(downtime)
	k.Start(t)
}
