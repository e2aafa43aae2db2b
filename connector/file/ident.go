package file

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A file source's checkpoint says which file its offset is in, not only
// which path: a path can be given another file (a re-export, a rotation,
// a rewrite in place) while the checkpoint still holds an offset into the
// old one. Like Vector's file source, a file is known by its device and
// inode and by a fingerprint of its first bytes; a file shorter than the
// committed offset is not the file either.

// fingerprintBytes is how much of a file's start its fingerprint covers.
const fingerprintBytes = 1024

// fileIdentity names one file independently of its path.
type fileIdentity struct {
	Dev, Ino uint64
	// HeadLen is how many bytes of the file's start Head hashes: the
	// first fingerprintBytes, or the whole file when it was shorter.
	HeadLen int
	Head    string // hex SHA-256 of those bytes, first 16 bytes
	// Parts is the key this file's part files are named with (name_by =
	// source_position), fixed when the route first read the file, so the
	// names stay the same for as long as the file is the file even when
	// it grows (HeadLen longer) between runs.
	Parts string
}

// identify reads f's identity; parts is left empty.
func identify(f *os.File) (fileIdentity, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return fileIdentity{}, 0, err
	}
	id := fileIdentity{}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Ino = uint64(sys.Dev), uint64(sys.Ino)
	}
	n := min(st.Size(), fingerprintBytes)
	head, err := headHash(f, int(n))
	if err != nil {
		return fileIdentity{}, 0, err
	}
	id.HeadLen, id.Head = int(n), head
	return id, st.Size(), nil
}

// headHash hashes the first n bytes of f ("" when f is shorter).
func headHash(f *os.File, n int) (string, error) {
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		return "", err
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:16]), nil
}

// sameFile reports whether cur (freshly identified) is the file id was
// taken of: the same inode, and the bytes id fingerprinted unchanged.
// why says what differs.
func (id fileIdentity) sameFile(f *os.File, cur fileIdentity) (same bool, why string, err error) {
	if id.Dev != cur.Dev || id.Ino != cur.Ino {
		return false, fmt.Sprintf("it is another file now (device %d inode %d, was device %d inode %d): replaced or rotated", cur.Dev, cur.Ino, id.Dev, id.Ino), nil
	}
	head, err := headHash(f, id.HeadLen)
	if err != nil {
		return false, "", err
	}
	if head != id.Head {
		return false, fmt.Sprintf("its first %d bytes are not the ones read before: rewritten in place", id.HeadLen), nil
	}
	return true, "", nil
}

// partsKey is the stable identity a file's part names carry: the route
// and the file (device, inode and fingerprint), hashed short. Two routes,
// or two files of one base name, never share part names, and a re-exported
// file (another inode or other first bytes) is not taken for the parts an
// earlier file left behind. The path is left out: a directory moved within
// its filesystem keeps its files, and their parts keep their names.
func partsKey(route string, id fileIdentity) string {
	h := sha256.New()
	fmt.Fprintf(h, "mqb-file-parts\x00%s\x00%d\x00%d\x00%d\x00%s", route, id.Dev, id.Ino, id.HeadLen, id.Head)
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// fileSourceMarker separates a path from its identity in the Source of
// a file checkpoint: "PATH|mqb-file:v1 dev=D ino=I head=N:HEX parts=KEY".
// Checkpoints written before identities hold the bare path.
const fileSourceMarker = "|mqb-file:v1 "

func encodeFileSource(path string, id fileIdentity) string {
	return fmt.Sprintf("%s%sdev=%d ino=%d head=%d:%s parts=%s", path, fileSourceMarker, id.Dev, id.Ino, id.HeadLen, id.Head, id.Parts)
}

// decodeFileSource splits a checkpoint's Source into the path and, when
// it has one, the file identity.
func decodeFileSource(source string) (path string, id fileIdentity, ok bool) {
	i := strings.LastIndex(source, fileSourceMarker)
	if i < 0 {
		return source, fileIdentity{}, false
	}
	rest := strings.ReplaceAll(source[i+len(fileSourceMarker):], ":", " ")
	var head string
	n, err := fmt.Sscanf(rest, "dev=%d ino=%d head=%d %s parts=%s", &id.Dev, &id.Ino, &id.HeadLen, &head, &id.Parts)
	if err != nil || n != 5 || id.HeadLen < 0 || id.HeadLen > fingerprintBytes {
		return source, fileIdentity{}, false
	}
	id.Head = head
	return source[:i], id, true
}

// CheckpointSource splits the Source of a file source's checkpoint
// into the path and a readable account of which file it is (empty for a
// checkpoint written before file identities), for `mqbc state show`.
func CheckpointSource(source string) (path, identity string) {
	p, id, ok := decodeFileSource(source)
	if !ok {
		return source, ""
	}
	return p, fmt.Sprintf("device %d inode %d, first %d bytes sha256:%s, parts key %s", id.Dev, id.Ino, id.HeadLen, id.Head, id.Parts)
}

// findRotated looks in dir for the file id names (a rotated file keeps
// its inode under another name).
func findRotated(dir string, id fileIdentity) (string, *os.File) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		sys, ok := info.Sys().(*syscall.Stat_t)
		if !ok || uint64(sys.Dev) != id.Dev || uint64(sys.Ino) != id.Ino {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.Open(p)
		if err != nil {
			return "", nil
		}
		cur, _, err := identify(f)
		if err == nil {
			if same, _, err := id.sameFile(f, cur); err == nil && same {
				return p, f
			}
		}
		f.Close()
		return "", nil
	}
	return "", nil
}
