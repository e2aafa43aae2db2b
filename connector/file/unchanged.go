package file

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// checkUnchanged is a consume-mode source's check, after each batch it
// read and before the batch is handed on, that the open file is still the
// one it started reading: no shorter than when it was opened (or than the
// offset read to), and its first bytes as they were. A file rewritten in
// place while it is read (an export written over the input with `>`, a
// truncate and write) keeps its inode, and the open descriptor goes on
// reading the new content at the old offset: the new records before that
// offset would be skipped, the one across it torn, and the old records
// after it lost, all with the run ending as if it had read the file. The
// batch that may hold bytes of the other content is refused with the
// route, so nothing of it is delivered and the position stays before it;
// the restart refuses the checkpoint (the file's first bytes differ) and
// says how to read the new file from its start.
//
// Every read of a batch precedes its check, so a rewrite that began
// before any of them is seen by this batch's check at the latest. It
// costs an fstat and a read of the file's first bytes (at most
// fingerprintBytes) per batch.
func (s *fileSource) checkUnchanged() error {
	if s.mode != modeConsume || s.f == nil || s.rotated {
		return nil
	}
	st, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("route %s: file source %s: %w", s.route, s.path, err)
	}
	var why string
	switch size := st.Size(); {
	case size < s.offset:
		why = fmt.Sprintf("it is %d bytes now, shorter than the %d read so far: truncated", size, s.offset)
	case size < s.size.Load():
		why = fmt.Sprintf("it is %d bytes now, shorter than the %d it had when the route opened it: truncated", size, s.size.Load())
	default:
		same, err := s.headUnchanged()
		if err != nil {
			return fmt.Errorf("route %s: file source %s: %w", s.route, s.path, err)
		}
		if same {
			return nil
		}
		why = fmt.Sprintf("its first %d bytes are not the ones it had when the route opened it: rewritten in place", s.id.HeadLen)
	}
	return fmt.Errorf("route %s: file source %s changed while it was read (at byte %d, record %d): %s. "+
		"The records read since may be another file's, so none of them was delivered and the route's position stays before them. "+
		"Give the source a file that is not written while it is read (write the new export under another name and rename it over the path); "+
		"to read the new file from its start, reset the route's state: `mqbc state reset %s %s`",
		s.route, s.path, s.offset, s.nextSeq, why, cmp.Or(s.pipeline, "FILE.mqb"), s.route)
}

// headUnchanged reports whether the file's first s.id.HeadLen bytes still
// hash to s.id.Head, as headHash would say, but reading them into a
// buffer the source keeps and comparing the hash in place: the check runs
// after every batch, and a file → file route moving 10M lines in blocks
// otherwise allocated 3.3 MB for it, garbage that made collections and
// heap growth of their own (TestCheckUnchangedAllocates).
func (s *fileSource) headUnchanged() (bool, error) {
	n := s.id.HeadLen
	if cap(s.head) < n {
		s.head = make([]byte, n)
	}
	buf := s.head[:n]
	if _, err := s.f.ReadAt(buf, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return s.id.Head == "", nil // headHash's "" for a file shorter than n
		}
		return false, err
	}
	sum := sha256.Sum256(buf)
	var hx [32]byte
	hex.Encode(hx[:], sum[:16])
	return string(hx[:]) == s.id.Head, nil
}
