package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// smallDisk mounts a tmpfs of size at dir, or skips the test where this
// process may not mount one (it needs root).
func smallDisk(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
}

// A dead-letter file on a disk that fills up mid-run: the run must stop
// non-zero naming the dlq, commit nothing past the first record whose
// dead letter was not written, and once there is room again the rerun
// delivers every record and dead-letters every failed one (each at least
// once: the route is at-least-once). The same for the sink's own file.
func TestFullDiskStopsTheRoute(t *testing.T) {
	const n = 20_000
	bad := func(i int) bool { return i%10 == 3 }
	for _, full := range []string{"dlq", "sink", "sqlite"} {
		t.Run(full, func(t *testing.T) {
			dir := t.TempDir()
			disk := filepath.Join(dir, "disk")
			if err := os.Mkdir(disk, 0o755); err != nil {
				t.Fatal(err)
			}
			smallDisk(t, disk, "64k")
			lines := recycledInput(t, filepath.Join(dir, "in.jsonl"), n, bad)
			dlqPath, outPath := "dlq.jsonl", "out.jsonl"
			if full == "dlq" {
				dlqPath = "disk/dlq.jsonl"
			} else {
				outPath = "disk/out.jsonl"
			}
			to := `to file { path = "` + outPath + `" }`
			if full == "sqlite" {
				// Effectively-once: the rerun's table must hold each record once.
				to = `to sql {
    url          = "sqlite://disk/out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, body TEXT NOT NULL)"
    insert_query = "INSERT INTO t (id, body) VALUES (${payload.id}, ${payload}) ON CONFLICT (id) DO NOTHING"
  }`
			}
			write(t, dir, "r.mqb", `route r {
  from file { path = "in.jsonl" }
  filter payload.qty > 5
  dlq { to file { path = "`+dlqPath+`" } }
  `+to+`
}
`)
			first := runIn(t, dir, "run", "r.mqb")
			if first.code != exitError || !strings.Contains(first.stderr, "no space left on device") && !strings.Contains(first.stderr, "disk is full") {
				t.Fatalf("run on a full disk: exit %d, want %d naming the full disk\nstdout:\n%s\nstderr:\n%s", first.code, exitError, first.stdout, first.stderr)
			}
			if full == "dlq" && !strings.Contains(first.stderr, "dlq") {
				t.Errorf("the error does not name the dlq:\n%s", first.stderr)
			}

			if out, err := exec.Command("mount", "-o", "remount,size=16m", disk).CombinedOutput(); err != nil {
				t.Fatalf("remount: %v %s", err, out)
			}
			rerun := runIn(t, dir, "run", "r.mqb")
			if rerun.code != exitOK {
				t.Fatalf("rerun: exit %d\nstdout:\n%s\nstderr:\n%s", rerun.code, rerun.stdout, rerun.stderr)
			}
			got := map[string]bool{}
			if full == "sqlite" {
				for _, body := range sqliteBodies(t, filepath.Join(disk, "out.db")) {
					got[body] = true
				}
			} else {
				for _, l := range readFileLines(t, filepath.Join(dir, outPath)) {
					got[l] = true
				}
			}
			dlq := checkEnvelopes(t, filepath.Join(dir, dlqPath), lines, "filter", false)
			lost := 0
			for i, l := range lines {
				if bad(i) && !dlq[uint64(i)] || !bad(i) && !got[l] {
					if lost++; lost <= 5 {
						t.Errorf("record %d (bad %v) is neither in the output nor in the dlq", i, bad(i))
					}
				}
			}
			if lost > 0 {
				t.Errorf("%d records lost", lost)
			}
		})
	}
}
