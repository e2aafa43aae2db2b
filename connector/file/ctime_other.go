//go:build !linux

package file

import (
	"os"
	"time"
)

// changeTime is the file's modification time: the inode's change time is
// read on Linux only (ctime_linux.go).
func changeTime(st os.FileInfo) time.Time { return st.ModTime() }

// listingStart is the time a listing starts at.
func listingStart() time.Time { return time.Now() }
