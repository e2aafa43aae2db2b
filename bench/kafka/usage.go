package main

import (
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
