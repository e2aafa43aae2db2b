package main

import (
	"fmt"
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
