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
// stages the body to a temp name, fsyncs it, and links it under the final
// name: link(2) refuses to replace an existing file, which is the
// does-not-exist precondition a bucket offers, and it is atomic, so a
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
	if err := os.Link(tmp, final); err != nil {
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

func (s *dirStore) List(_ context.Context, prefix string) ([]string, error) {
	var names []string
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
		if strings.HasPrefix(rel, prefix) {
			names = append(names, rel)
		}
		return nil
	})
	if errors.Is(err, fs.ErrPermission) {
		err = &permanentError{err}
	}
	sort.Strings(names)
	return names, err
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
