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
// Restart stops it with SIGTERM, as Stop does.
type KafkaProcess struct {
	procServer
	cfg     kafkabroker.Config
	brokers string // guarded by mu
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
	addrFile := filepath.Join(dir, "addr")
	k := &KafkaProcess{cfg: cfg}
	k.procServer = procServer{
		name: "mqb-testbroker", dir: dir, logName: "mqb-testbroker.log",
		command: func() (string, []string, error) {
			bin, err := testbrokerBinary()
			if err != nil {
				return "", nil, err
			}
			os.Remove(addrFile)
			return bin, k.args(addrFile), nil
		},
		ready: func(context.Context) error {
			// The broker writes the file by rename once it listens.
			b, err := os.ReadFile(addrFile)
			if err != nil {
				return err
			}
			k.listening(strings.TrimSpace(string(b)))
			return nil
		},
		readyTimeout: 30 * time.Second,
		stopSignal:   syscall.SIGTERM, // the broker saves its state
		grace:        15 * time.Second,
	}
	if err := k.start(); err != nil {
		t.Fatalf("testsrv: start mqb-testbroker: %v", err)
	}
	t.Cleanup(k.shutdown)
	return k
}

// args is mqb-testbroker's command line.
func (k *KafkaProcess) args(addrFile string) []string {
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
	return args
}

// listening records the bootstrap list the broker wrote once it listens
// (called by the readiness probe, with mu held). A broker started on port
// 0 keeps the port it got across restarts.
func (k *KafkaProcess) listening(addr string) {
	k.brokers = addr
	if k.cfg.Port == 0 {
		first, _, _ := strings.Cut(addr, ",")
		_, port, _ := strings.Cut(first, ":")
		k.cfg.Port, _ = strconv.Atoi(port)
	}
}

// Brokers is the comma-separated bootstrap list; it stays the same across
// restarts.
func (k *KafkaProcess) Brokers() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.brokers
}
