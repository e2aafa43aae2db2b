package main

import (
	"os"
	goruntime "runtime"
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

// childUsage is what a finished child process (kcat) spent: CPU time (user
// and system, as /usr/bin/time reports them) and its peak resident set.
type childUsage struct {
	cpu    time.Duration
	maxRSS int64 // bytes
}

func usageOf(ps *os.ProcessState) childUsage {
	u := childUsage{cpu: ps.UserTime() + ps.SystemTime()}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		u.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return u
}
