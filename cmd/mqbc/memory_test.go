package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMemorySettings: GOGC and GOMEMLIMIT from the environment win; the
// soft limit is 90% of the cgroup's memory limit, v2 or v1, and there is
// none when the cgroup has none.
func TestMemorySettings(t *testing.T) {
	root := t.TempDir()
	writeFile := func(rel, text string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("svc/memory.max", "1000000000\n")
	writeFile("open/memory.max", "max\n")
	writeFile("memory/job/memory.limit_in_bytes", "200000000\n")
	writeFile("memory/memory.limit_in_bytes", "9223372036854771712\n")
	for _, tc := range []struct {
		name       string
		env        map[string]string
		procCgroup string
		gogc       int
		limit      int64
	}{
		{"v2 limit", nil, "0::/svc\n", 50, 900000000},
		{"v2 no limit", nil, "0::/open\n", 50, 0},
		{"v1 limit", nil, "4:memory:/job\n3:cpuset:/\n0::/\n", 50, 180000000},
		{"v1 namespaced root, unlimited", nil, "4:cpu,memory:/elsewhere\n", 50, 0},
		{"no cgroup file", nil, "", 50, 0},
		{"GOGC set", map[string]string{"GOGC": "200"}, "0::/svc\n", -1, 900000000},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, "0::/svc\n", 50, 0},
		{"both set", map[string]string{"GOGC": "off", "GOMEMLIMIT": "64MiB"}, "0::/svc\n", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gogc, limit := memorySettings(func(k string) string { return tc.env[k] }, tc.procCgroup, root)
			if gogc != tc.gogc || limit != tc.limit {
				t.Errorf("gogc %d limit %d, want %d and %d", gogc, limit, tc.gogc, tc.limit)
			}
		})
	}
}
