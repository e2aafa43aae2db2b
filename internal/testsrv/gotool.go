package testsrv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// goCommand runs the go tool in wd with modules fetched as needed and cgo
// off, returning its stdout.
func goCommand(wd string, args ...string) ([]byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil && os.Getenv("GOROOT") != "" {
		goBin, err = filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
	}
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = wd
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// buildGoTool builds the main package pkg at version into dir/name, from a
// throwaway module that requires it as a tool: unlike `go install
// pkg@version`, that works for modules whose go.mod has replace
// directives (they are ignored; the versions the module requires are
// used).
func buildGoTool(dir, pkg, version, name string) error {
	mod := filepath.Join(dir, "tool")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module mqbtesttool\n"), 0o644); err != nil {
		return err
	}
	if _, err := goCommand(mod, "get", "-tool", pkg+"@"+version); err != nil {
		return err
	}
	if _, err := goCommand(mod, "build", "-trimpath", "-o", filepath.Join(dir, name), pkg); err != nil {
		return err
	}
	return os.RemoveAll(mod)
}

// goTool is a server binary built with go from the module proxy on first
// use (once per test binary, kept in a template directory keyed by version
// and toolchain), or taken as is from the environment variable env.
type goTool struct {
	name    string // the binary's file name and cache key
	what    string // what it is, for the skip or failure message
	version string
	env     string // names a prebuilt binary to use instead
	build   func(dir string) error

	once sync.Once
	bin  string
	err  error
}

// binary returns the tool's path. When it cannot be built the test is
// skipped, or fails under CI=true.
func (g *goTool) binary(t testing.TB) string {
	t.Helper()
	g.once.Do(func() {
		if p := os.Getenv(g.env); p != "" {
			g.bin = p
			return
		}
		var dir string
		dir, g.err = templateDir(versionKey(g.name, g.version, runtime.Version()), g.build)
		g.bin = filepath.Join(dir, g.name)
	})
	if g.err != nil {
		msg := fmt.Sprintf("build %s %s (%s) with go from the module proxy: %v", g.what, g.version, g.name, g.err)
		if os.Getenv("CI") == "true" {
			t.Fatal("testsrv: " + msg)
		}
		t.Skipf("testsrv: %s (set %s to a %s binary to use instead)", msg, g.env, g.name)
	}
	return g.bin
}
