package testsrv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Main runs the tests of a package and then stops every server this package
// started for the test binary, gracefully, and removes their files. Use it
// from TestMain:
//
//	func TestMain(m *testing.M) { testsrv.Main(m) }
//
// Without it the shared servers still die with the test binary (they are
// started with a parent-death signal), but abruptly, and their directory is
// only removed by the next test binary that uses testsrv.
//
// It also removes the package directory's .mqb, where routes a test runs
// without a state directory of its own keep their checkpoints (the
// stdlib default, .mqb/state), before the tests and after: a checkpoint
// left by an earlier run names a server that is gone (a replication slot,
// a consumer group), and the route would refuse to start against the new
// one.
func Main(m *testing.M) {
	os.RemoveAll(".mqb")
	code := m.Run()
	StopAll()
	os.RemoveAll(".mqb")
	os.Exit(code)
}

// StopAll stops the servers shared by the test binary and removes their
// files. Main calls it; call it yourself from a TestMain that needs to do
// more after m.Run.
func StopAll() {
	sharedMu.Lock()
	stops := sharedStops
	sharedStops = nil
	sharedMu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	if root != "" {
		os.RemoveAll(root)
	}
}

var (
	sharedMu    sync.Mutex
	sharedStops []func()
)

// atExit registers fn to run in StopAll.
func atExit(fn func()) {
	sharedMu.Lock()
	sharedStops = append(sharedStops, fn)
	sharedMu.Unlock()
}

// unavailable skips the test when a server binary is not installed, naming
// the Debian package that provides it. On CI (CI=true) a missing server is a
// broken machine, not an optional feature, so the test fails instead.
func unavailable(t testing.TB, pkg, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + fmt.Sprintf(" (install the Debian package %s: apt-get install -y %s)", pkg, pkg)
	if os.Getenv("CI") == "true" {
		t.Fatal("testsrv: " + msg)
		return
	}
	t.Skip("testsrv: " + msg)
}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// rootDir is the directory holding every file of the servers this test
// binary shares. Its name carries our pid so that a later binary can remove
// what a killed one left behind.
func rootDir() (string, error) {
	rootOnce.Do(func() {
		sweepStale()
		root, rootErr = os.MkdirTemp("", fmt.Sprintf("mqb-testsrv-%d-", os.Getpid()))
		if rootErr == nil {
			// Servers running as the postgres user must reach their dirs.
			rootErr = os.Chmod(root, 0o755)
		}
	})
	return root, rootErr
}

// privateDir makes a directory for a server private to one test, removed
// when the test ends. Unlike t.TempDir its parents are open to the server's
// OS user.
func privateDir(t testing.TB, prefix string) string {
	t.Helper()
	r, err := rootDir()
	if err != nil {
		t.Fatalf("testsrv: %v", err)
	}
	dir, err := os.MkdirTemp(r, prefix)
	if err != nil {
		t.Fatalf("testsrv: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// sweepStale removes the directories of test binaries that died without
// cleaning up (a killed `go test`, a binary without Main).
func sweepStale() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), "mqb-testsrv-*"))
	for _, dir := range matches {
		rest := strings.TrimPrefix(filepath.Base(dir), "mqb-testsrv-")
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another process
// may take it before the server binds; servers here start fast enough that
// this has not mattered, and a failed start says which port it could not get.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// onFreePorts runs start with n free ports, and again with new ones when a
// port was taken between our probe and the server's bind (test binaries of
// other packages start servers at the same time).
func onFreePorts(start func(ports []int) error, n int) error {
	var err error
	for range 4 {
		ports := make([]int, n)
		for i := range ports {
			if ports[i], err = freePort(); err != nil {
				return err
			}
		}
		err = start(ports)
		if err == nil || !strings.Contains(err.Error(), "in use") {
			return err
		}
	}
	return err
}

// spawnCh feeds a goroutine locked to one OS thread that never exits. A
// parent-death signal fires when the *thread* that forked the child dies,
// so every server is forked from this thread: the servers die with the test
// binary and never outlive a run, even one killed by a timeout.
var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

func startOnLockedThread(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread()
			for fn := range spawnCh {
				fn()
			}
		}()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
	done := make(chan error, 1)
	spawnCh <- func() { done <- cmd.Start() }
	return <-done
}

// process is one running server binary with its log file.
type process struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error // the Wait error, set before exited closes
}

func startProcess(logPath string, cred *syscall.Credential, name string, args ...string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := startOnLockedThread(cmd); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends sig to the process group, then SIGKILL after grace.
func (p *process) stop(sig syscall.Signal, grace time.Duration) {
	if !p.running() {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.exited:
	case <-time.After(grace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// waitReady polls ready until it succeeds, the process exits or the
// timeout passes; the error carries the end of the server's log.
func (p *process) waitReady(timeout time.Duration, ready func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if !p.running() {
			return fmt.Errorf("%s exited during start-up (%v):\n%s", filepath.Base(p.cmd.Path), p.err, tail(p.log))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		last = ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v\n%s", filepath.Base(p.cmd.Path), timeout, last, tail(p.log))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "--- " + path + " ---\n" + string(bytes.Join(lines, []byte("\n")))
}

// runCmd runs a set-up command (initdb, install-db) to completion.
func runCmd(cred *syscall.Credential, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// dbName turns a test name into a database name unique within the server.
func dbName(t testing.TB, seq int) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	fmt.Fprintf(&b, "_%d", seq)
	return b.String()
}

// templateDir returns a directory built once per machine by build and
// reused by later test binaries: initdb and mariadb-install-db take seconds,
// copying their output takes milliseconds. key must change whenever what
// build produces would (server version, options).
func templateDir(key string, build func(dir string) error) (string, error) {
	cache := filepath.Join(os.TempDir(), "mqb-testsrv-cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	os.Chmod(cache, 0o755)
	final := filepath.Join(cache, key)
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	// Builds of binaries killed halfway never get renamed.
	if stale, _ := filepath.Glob(filepath.Join(cache, "build-*")); len(stale) > 0 {
		for _, d := range stale {
			if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > 10*time.Minute {
				os.RemoveAll(d)
			}
		}
	}
	tmp, err := os.MkdirTemp(cache, "build-")
	if err != nil {
		return "", err
	}
	os.Chmod(tmp, 0o755)
	if err := build(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	// Another binary may have built it meanwhile: either copy will do.
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(final); serr != nil {
			return "", err
		}
	}
	return final, nil
}

// copyTree copies src to dst (which must not exist) keeping owners and
// modes.
func copyTree(src, dst string) error {
	out, err := exec.Command("cp", "-a", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp -a %s %s: %w: %s", src, dst, err, out)
	}
	return nil
}

// versionKey names a template after a server's version output and the
// options its set-up used.
func versionKey(prefix string, parts ...string) string {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s-%016x", prefix, h.Sum64())
}

func commandOutput(name string, args ...string) string {
	out, _ := exec.Command(name, args...).CombinedOutput()
	return string(out)
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		if ppid, _, ok := procStat(f); ok && ppid == pid {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, n)
		}
	}
	return out
}

// procStat reads the parent pid and state from /proc/PID/stat.
func procStat(path string) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return ppid, fields[0][0], err == nil
}

// waitGone waits until the processes have exited (zombies count: they hold
// nothing any more).
func waitGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			_, state, ok := procStat(fmt.Sprintf("/proc/%d/stat", pid))
			if !ok || state == 'Z' || state == 'X' {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
