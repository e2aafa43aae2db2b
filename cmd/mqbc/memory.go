package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// defaultGOGC is the garbage collector's target when GOGC is not set: a
// route's live heap is small and steady (the batches in flight), and
// collecting at 50% growth instead of 100% keeps the peak heap near it
// at a cost in CPU too small to show in bench/pipeline.
const defaultGOGC = 50

// memoryLimitShare is the part of a container's memory limit given to the
// Go runtime as its soft limit (GOMEMLIMIT) when GOMEMLIMIT is not set;
// the rest is for what the runtime does not count (Pebble's and SQLite's
// C allocations, the binary's pages).
const memoryLimitShare = 0.9

// memoryNotes is the part of `mqbc run --help` that says so.
const memoryNotes = `
Memory: unless the environment sets them, mqbc runs with GOGC=50 and, in a
container or cgroup with a memory limit, GOMEMLIMIT at 90% of that limit.
Set GOGC or GOMEMLIMIT to override either (GOGC=100 is Go's default).`

// memorySettings is what applyMemoryDefaults sets: gogc unless the
// environment has GOGC, limit (> 0) unless it has GOMEMLIMIT or there is
// no cgroup memory limit. procCgroup is /proc/self/cgroup's text and
// cgroupRoot where the cgroup file systems are mounted.
func memorySettings(getenv func(string) string, procCgroup, cgroupRoot string) (gogc int, limit int64) {
	gogc = -1
	if getenv("GOGC") == "" {
		gogc = defaultGOGC
	}
	if getenv("GOMEMLIMIT") == "" {
		if l, ok := cgroupMemoryLimit(procCgroup, cgroupRoot); ok {
			limit = int64(float64(l) * memoryLimitShare)
		}
	}
	return gogc, limit
}

// applyMemoryDefaults sets the runtime's GC target and soft memory limit
// for a streaming process, leaving what the environment sets alone.
func applyMemoryDefaults() {
	procCgroup, _ := os.ReadFile("/proc/self/cgroup")
	gogc, limit := memorySettings(os.Getenv, string(procCgroup), "/sys/fs/cgroup")
	if gogc >= 0 {
		debug.SetGCPercent(gogc)
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
}

// cgroupMemoryLimit is the memory limit of the cgroup this process is in:
// memory.max under cgroup v2, memory.limit_in_bytes under v1 (at the
// process's cgroup path, or at the mount's root, which is the
// container's own cgroup under a cgroup namespace). ok is false when
// there is none ("max", or v1's near-2^63 "unlimited").
func cgroupMemoryLimit(procCgroup, cgroupRoot string) (limit int64, ok bool) {
	var files []string
	for line := range strings.Lines(procCgroup) {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			files = append(files, filepath.Join(cgroupRoot, parts[2], "memory.max"))
		case strings.Contains(","+parts[1]+",", ",memory,"):
			files = append(files, filepath.Join(cgroupRoot, "memory", parts[2], "memory.limit_in_bytes"),
				filepath.Join(cgroupRoot, "memory", "memory.limit_in_bytes"))
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, false // "max", or unlimited
		}
		return n, true
	}
	return 0, false
}
