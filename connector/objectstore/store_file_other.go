//go:build !linux

package objectstore

import (
	"io/fs"
	"os"
)

// changeTime is a file's modification time in nanoseconds (the inode
// change time is read on Linux only).
func changeTime(info fs.FileInfo) int64 { return info.ModTime().UnixNano() }

// placeNew links the staged file tmp under final unless a file is there.
func placeNew(tmp, final string) error { return os.Link(tmp, final) }
