package file

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writing the range's
// dirty pages out, without waiting for them.
const syncFileRangeWrite = 2

// startWriteback asks the kernel to start writing the n bytes at off of f
// to the disk now, not at the next fsync: the commit's fsync then waits
// only for what is still in flight, and the disk works while the route
// reads on. It changes no guarantee (the fsync still decides what is
// durable), so an error is only a lost head start.
func startWriteback(f *os.File, off, n int64) {
	syscall.SyncFileRange(int(f.Fd()), off, n, syncFileRangeWrite)
}
