//go:build linux

package file

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// changeTime is when the file's inode last changed (ctime): written,
// renamed, linked or had its mode changed; the modification time where
// the system does not say.
func changeTime(st os.FileInfo) time.Time {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return time.Unix(sys.Ctim.Sec, sys.Ctim.Nsec)
	}
	return st.ModTime()
}

// listingStart returns the time a listing starts at, such that every
// change made after the listing begins leaves a ctime after it, and every
// change made before the call a ctime not after it. The kernel may stamp
// ctime from its coarse clock, which lags the precise one by up to a
// tick: so it takes the precise time, then waits (a few milliseconds at
// most) until the coarse clock has passed it, before the listing begins.
func listingStart() time.Time {
	at := time.Now()
	for range 1000 {
		var now unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now); err != nil || time.Unix(now.Unix()).After(at) {
			break
		}
		time.Sleep(500 * time.Microsecond)
	}
	return at
}
