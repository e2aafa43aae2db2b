// Package pebbledb opens Pebble databases shared by several routes of one
// process. Pebble locks its directory, so two routes naming the same
// pebble:// store must share one *pebble.DB; Open reference-counts handles by
// absolute directory and the last Close closes the database.
package pebbledb

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"
)

// options tunes Pebble for dedup's access pattern: almost every lookup is
// of a key that is not there (a new record), so every level gets a bloom
// filter (without one a miss reads and decompresses blocks of each L0 table:
// over half the route's CPU in profiles); blocks are left uncompressed —
// keys are short and the store is local — to spare snappy on every read.
func options(dir string) *pebble.Options {
	o := &pebble.Options{
		Logger: quietLogger{dir: dir},
		FS:     privateFS{vfs.Default},
	}
	o.Levels = make([]pebble.LevelOptions, 7)
	for i := range o.Levels {
		o.Levels[i] = pebble.LevelOptions{FilterPolicy: bloom.FilterPolicy(10), Compression: pebble.NoCompression}
	}
	return o
}

// Handle is one reference to a shared database.
type Handle struct {
	DB *pebble.DB
	// Epoch is random per opening of the directory. Pebble's directory lock
	// means only one process holds the store, so a value written under
	// another epoch was written by a process that is gone.
	Epoch uint64
	Dir   string
	// First is true for the handle that opened the directory in this
	// process (before anyone else could write to it).
	First bool

	closeOnce sync.Once
}

type shared struct {
	db    *pebble.DB
	epoch uint64
	refs  int
}

var (
	mu   sync.Mutex
	open = map[string]*shared{}
)

// DirFromURL returns the directory of a pebble://dir store URL, resolved
// against base when relative.
func DirFromURL(url, base string) (string, error) {
	dir, ok := strings.CutPrefix(url, "pebble://")
	if !ok {
		return "", fmt.Errorf("store %q: only pebble://dir stores are supported by this runtime", url)
	}
	if dir == "" {
		return "", fmt.Errorf("store %q: empty directory", url)
	}
	if !filepath.IsAbs(dir) && base != "" {
		dir = filepath.Join(base, dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("store %q: %w", url, err)
	}
	return abs, nil
}

// Open returns a handle on the database in dir, opening it on first use.
func Open(dir string) (*Handle, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pebble store %s: %w", dir, err)
	}
	mu.Lock()
	defer mu.Unlock()
	s, ok := open[abs]
	first := !ok
	if !ok {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return nil, fmt.Errorf("open pebble store %s: %w", abs, err)
		}
		db, err := pebble.Open(abs, options(abs))
		if errors.Is(err, syscall.EAGAIN) { // the directory's LOCK is held
			return nil, fmt.Errorf("open pebble store %s: another process has it open (a run of a route kept there?): %w", abs, err)
		}
		if err != nil {
			return nil, fmt.Errorf("open pebble store %s: %w", abs, err)
		}
		var b [8]byte
		_, _ = rand.Read(b[:])
		s = &shared{db: db, epoch: binary.LittleEndian.Uint64(b[:])}
		open[abs] = s
	}
	s.refs++
	return &Handle{DB: s.db, Epoch: s.epoch, Dir: abs, First: first}, nil
}

// Close drops this reference; the last one closes the database.
func (h *Handle) Close() error {
	var err error
	h.closeOnce.Do(func() {
		mu.Lock()
		defer mu.Unlock()
		s := open[h.Dir]
		if s == nil {
			return
		}
		s.refs--
		if s.refs == 0 {
			delete(open, h.Dir)
			if cerr := s.db.Close(); cerr != nil {
				err = fmt.Errorf("close pebble store %s: %w", h.Dir, cerr)
			}
		}
	})
	return err
}

// IsOpen reports whether the directory is still open (by any handle).
func (h *Handle) IsOpen() bool {
	mu.Lock()
	defer mu.Unlock()
	s, ok := open[h.Dir]
	return ok && s.db == h.DB
}

// Sync makes every write applied so far durable (fsyncs the WAL).
func (h *Handle) Sync() error {
	if err := h.Write("sync", func() error { return h.DB.LogData(nil, pebble.Sync) }); err != nil {
		return fmt.Errorf("sync pebble store %s: %w", h.Dir, err)
	}
	return nil
}

// Write runs fn, a write to the database (op names it). Pebble panics when
// it cannot write its log — a full disk, a file system gone read-only —
// and leaves its commit pipeline locked: no later write can succeed and
// concurrent ones would wait forever, so the process cannot go on. Write
// stops it the way a crash would, which every store and sink is built to
// survive, but with one line saying which store failed and why instead
// of a stack trace.
func (h *Handle) Write(op string, fn func() error) error {
	defer func() {
		if r := recover(); r != nil {
			fatal(fmt.Sprintf("mqb: pebble store %s: %s: %v\n"+
				"mqb: the store cannot take more writes, so the process stops here. Nothing acknowledged is lost: "+
				"free space or make the directory writable, then run again to resume.\n", h.Dir, op, r))
		}
	}()
	return fn()
}

// fatal prints msg and ends the process; a variable so tests can see it.
var fatal = func(msg string) {
	os.Stderr.WriteString(msg)
	os.Exit(1)
}

// quietLogger drops Pebble's informational chatter; a fatal error (Pebble
// expects Fatalf not to return) ends the process with one clear line
// naming the store: Pebble's own message may name no file ("MANIFEST sync
// failed: input/output error").
type quietLogger struct{ dir string }

func (quietLogger) Infof(string, ...any) {}
func (l quietLogger) Fatalf(format string, args ...any) {
	fatal(fatalMessage(l.dir, fmt.Sprintf(format, args...)))
	panic("unreachable") // fatal exits
}

func fatalMessage(dir, msg string) string {
	return "mqb: pebble store " + dir + ": " + strings.TrimPrefix(msg, "pebble: ") + "\n" +
		"mqb: a pebble store failed, so the process stops here. Nothing acknowledged is lost: fix the cause, then run again to resume.\n"
}

// privateFS keeps a store to its user: Pebble creates directories 0755 and
// files 0666 (less the umask), but dedup keys and checkpoints are the
// user's data, so directories are made 0700 and new files 0600.
type privateFS struct{ vfs.FS }

func (fs privateFS) MkdirAll(dir string, _ os.FileMode) error {
	return fs.FS.MkdirAll(dir, 0o700)
}

func (fs privateFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (fs privateFS) OpenReadWrite(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, opts...) // creates a missing file
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (fs privateFS) Lock(name string) (io.Closer, error) {
	l, err := fs.FS.Lock(name) // creates the LOCK file
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
