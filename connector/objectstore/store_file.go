package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// dirStore is an object store over a local directory (file:///dir). A put
// stages the body to a temp name, fsyncs it, and renames it under the
// final name without replacing (placeNew; a link where the file system
// has no such rename): it refuses to replace an existing file, which is
// the does-not-exist precondition a bucket offers, and it is atomic, so a
// reader (or a crash) never sees half an object.
type dirStore struct {
	root string
}

func openDirStore(dir, baseDir string) (*dirStore, error) {
	if !filepath.IsAbs(dir) && baseDir != "" {
		dir = filepath.Join(baseDir, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create object store directory: %w", err)
	}
	s := &dirStore{root: dir}
	// Temp files of puts that never committed.
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && isStagedName(d.Name()) {
			os.Remove(path)
		}
		return nil
	})
	return s, nil
}

func isStagedName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp")
}

func (s *dirStore) String() string { return "file://" + s.root }

func (s *dirStore) path(name string) string { return filepath.Join(s.root, filepath.FromSlash(name)) }

func (s *dirStore) PutIfAbsent(_ context.Context, name string, data []byte, _ string) (bool, error) {
	final := s.path(name)
	dir := filepath.Dir(final)
	if _, err := os.Lstat(final); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(final)+".*.tmp")
	if err != nil {
		return false, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if err := placeNew(tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	if err := syncDir(dir); err != nil {
		return true, err
	}
	return true, nil
}

func (s *dirStore) List(ctx context.Context, prefix string) ([]string, error) {
	names, _, err := s.listNames(prefix, false)
	return names, err
}

// ListStamped is List with each file's change time, in nanoseconds: it
// moves on every write, and on a file renamed over the name
// (stampLister).
func (s *dirStore) ListStamped(_ context.Context, prefix string) ([]string, []int64, error) {
	return s.listNames(prefix, true)
}

func (s *dirStore) listNames(prefix string, stamped bool) ([]string, []int64, error) {
	type named struct {
		name  string
		stamp int64
	}
	var found []named
	err := filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || isStagedName(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(s.root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !strings.HasPrefix(rel, prefix) {
			return nil
		}
		n := named{name: rel}
		if stamped {
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed since it was listed
			}
			if err != nil {
				return err
			}
			n.stamp = changeTime(info)
		}
		found = append(found, n)
		return nil
	})
	if errors.Is(err, fs.ErrPermission) {
		err = &permanentError{err}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].name < found[j].name })
	names := make([]string, len(found))
	var stamps []int64
	if stamped {
		stamps = make([]int64, len(found))
	}
	for i, n := range found {
		names[i] = n.name
		if stamped {
			stamps[i] = n.stamp
		}
	}
	return names, stamps, err
}

func (s *dirStore) Get(_ context.Context, name string) ([]byte, error) {
	return os.ReadFile(s.path(name))
}

func (s *dirStore) Close() error { return nil }

// syncDir makes a new link in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
