package stdlib

import (
	"path/filepath"
	"strings"
)

// FilePathNamesMany reports whether a file source's path names many files
// rather than one: a directory (written with a trailing slash) or a glob
// pattern (any of * ? [ in it, with filepath.Match's syntax). The checker
// and the file connector both read it, so what builds is what runs.
func FilePathNamesMany(path string) bool {
	return strings.HasSuffix(path, "/") || strings.ContainsAny(path, "*?[")
}

// CheckFileGlob is the error a malformed glob pattern gives (nil for a
// directory or a well-formed pattern).
func CheckFileGlob(path string) error {
	if strings.HasSuffix(path, "/") {
		return nil
	}
	_, err := filepath.Match(path, "")
	return err
}
