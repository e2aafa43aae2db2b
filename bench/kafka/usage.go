package main

import (
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"syscall"
	"time"
)

// usage is what this process had spent at a point: heap allocations and
// CPU time (user and system). The difference over an mqb run is its cost
// per record, a figure that, unlike records/s, does not depend on what
// else the machine is running.
type usage struct {
	mallocs uint64
	cpu     time.Duration
}

func readUsage() usage {
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return usage{mallocs: ms.Mallocs, cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
}

func (u usage) since(before usage) usage {
	return usage{mallocs: u.mallocs - before.mallocs, cpu: u.cpu - before.cpu}
}

// peakRSS is this process's largest resident set so far, in bytes (mqb
// runs in it; the broker and kcat are other processes).
func peakRSS() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss << 10 // KiB on Linux
}

// childUsage is what a finished child process (kcat) spent, as
// /usr/bin/time reports it: CPU time (user and system) and its peak
// resident set. (The rusage Go's os/exec returns gives the child's peak
// as at least this process's: the child shares its memory until exec.)
type childUsage struct {
	cpu    time.Duration
	maxRSS int64 // bytes
}

// parseTime reads /usr/bin/time's "%U %S %M" line: user and system
// seconds, peak RSS in KiB.
func parseTime(s string) (childUsage, error) {
	var user, sys float64
	var kib int64
	if _, err := fmt.Sscanf(strings.TrimSpace(s[strings.LastIndexByte(strings.TrimSpace(s), '\n')+1:]), "%f %f %d", &user, &sys, &kib); err != nil {
		return childUsage{}, fmt.Errorf("time output %q: %w", s, err)
	}
	return childUsage{cpu: time.Duration((user + sys) * float64(time.Second)), maxRSS: kib << 10}, nil
}

// processCPU is the CPU time (user and system) another process has spent
// so far, from /proc (the broker's, to see what serving each tool cost
// it); 0 where /proc cannot say.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 14th and 15th of the line.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	var user, sys int64
	fmt.Sscan(f[11], &user)
	fmt.Sscan(f[12], &sys)
	return time.Duration(user+sys) * time.Second / clockTicks
}

// clockTicks is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100
