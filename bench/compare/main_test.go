package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestCompareRuns runs the file pairs (against cat and dd) and SQLite pairs (the dedup left out and
// kept) on a small input: both sides must succeed (mqbc exits non-zero on
// any record it could not deliver) and the table must carry a ratio for
// each.
func TestCompareRuns(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	var out strings.Builder
	if err := run([]string{"-n", "3000", "-runs", "1", "-only", "file,file-sync,sqlite,sqlite-dedup"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, name := range []string{"file→file", "file→file (sync)", "file→SQLite", "file→SQLite dedup"} {
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, name+"  ") && strings.Contains(line, "x ") && strings.Contains(line, "MiB") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no ratio in\n%s", name, out.String())
		}
	}
}

// TestMiB: peak RSS is shown to a tenth of a MiB, not rounded down to a
// whole one.
func TestMiB(t *testing.T) {
	for kib, want := range map[int64]string{41792: "40.8", 40960: "40.0", 8192: "8.0", 39644: "38.7"} {
		if got := mib(kib); got != want {
			t.Errorf("mib(%d) = %s, want %s", kib, got, want)
		}
	}
}

// TestMain stops the PostgreSQL server testsrv started.
func TestMain(m *testing.M) { testsrv.Main(m) }

// TestComparePostgres runs the PostgreSQL pairs on a small input against
// a test server: the upsert and bulk_copy routes, \copy and the staged
// upsert psql runs all succeed and each pair gets a ratio.
func TestComparePostgres(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("psql is not installed")
	}
	url := testsrv.Postgres(t)
	mqbc := filepath.Join(t.TempDir(), "mqbc")
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", mqbc, "./cmd/mqbc")
	build.Dir = strings.TrimSpace(string(root))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mqbc: %v\n%s", err, out)
	}
	for _, only := range []string{"postgres", "postgres-copy", "postgres-cap", "postgres-keyed"} {
		var out strings.Builder
		if err := run([]string{"-n", "3000", "-runs", "1", "-only", only, "-pg", url, "-mqbc", mqbc}, &out); err != nil {
			t.Fatalf("%s: %v\n%s", only, err, out.String())
		}
		if !strings.Contains(out.String(), "x ") {
			t.Errorf("%s: no ratio in\n%s", only, out.String())
		}
	}
}

// TestCompareBinaries: with two mqbc binaries the SQLite pair prints a
// row for each, both against the same reference runs.
func TestCompareBinaries(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	mqbc := filepath.Join(t.TempDir(), "mqbc")
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", mqbc, "./cmd/mqbc")
	build.Dir = strings.TrimSpace(string(root))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build mqbc: %v\n%s", err, out)
	}
	var out strings.Builder
	if err := run([]string{"-n", "2000", "-runs", "1", "-only", "sqlite", "-mqbc", "old=" + mqbc + ",new=" + mqbc}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, name := range []string{"file→SQLite old", "file→SQLite new"} {
		if !strings.Contains(out.String(), "\n"+name+" ") {
			t.Errorf("no row %q in\n%s", name, out.String())
		}
	}
	if _, err := parseBinaries("old=a,new"); err == nil {
		t.Error("parseBinaries took a name without a path")
	}
}
