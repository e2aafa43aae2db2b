package objectstore

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// changeTime is a file's inode change time in nanoseconds, which every
// write and a rename over its name move; its modification time where
// the system does not say.
func changeTime(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Sec*1e9 + st.Ctim.Nsec
	}
	return info.ModTime().UnixNano()
}

// placeNew puts the staged file tmp under final unless a file is there
// (fs.ErrExist), in one step: a rename that does not replace, so the
// object's change time moves once, when it appears (a link and an unlink
// of tmp would move it twice, and a source that listed it in between
// would take the second for a write over it). A file system without the
// rename gets the link.
func placeNew(tmp, final string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return fs.ErrExist
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.ENOTSUP):
		return os.Link(tmp, final)
	}
	return &os.LinkError{Op: "rename", Old: tmp, New: final, Err: err}
}
