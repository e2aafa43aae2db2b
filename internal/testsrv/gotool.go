package testsrv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
