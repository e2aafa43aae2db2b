package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
)

func init() {
	register(&command{
		Name:    "fmt",
		Usage:   "mqbc fmt [-w] [-l] [--check] FILE|DIR|-…",
		Summary: "format .mqb files in the canonical layout (stdout by default, -w rewrites, -l lists changed files, --check lists them and exits 1)",
		Run:     runFmt,
	})
}

func runFmt(args []string, stdout, stderr io.Writer) int {
	c := commands["fmt"]
	fs := newFlags(c, stderr)
	write := fs.Bool("w", false, "rewrite each file in place instead of printing it")
	list := fs.Bool("l", false, "list the files whose layout would change instead of printing them (exit 0, as gofmt -l)")
	check := fs.Bool("check", false, "list the files whose layout would change and exit 1 when there is one (for CI); rewrites nothing")
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(paths) == 0 {
		fs.Usage()
		return exitUsage
	}
	if *check && *write {
		fmt.Fprintln(stderr, "mqbc fmt: --check only reports; use -w or --check, not both")
		return exitUsage
	}
	*list = *list || *check
	files, err := expandMQB(paths)
	if err != nil {
		fmt.Fprintf(stderr, "mqbc fmt: %v\n", err)
		return exitError
	}
	code := exitOK
	for _, path := range files {
		changed, err := fmtFile(path, *write, *list, stdout, stderr)
		if err != nil {
			if err != errHasDiags {
				fmt.Fprintf(stderr, "mqbc fmt: %v\n", err)
			}
			code = exitError
		}
		if changed && *check {
			code = exitError
		}
	}
	return code
}

var errHasDiags = fmt.Errorf("syntax errors")

// fmtFile formats one file ("-" is stdin) and prints, lists or rewrites it;
// changed reports whether its layout was not the canonical one.
func fmtFile(path string, write, list bool, stdout, stderr io.Writer) (changed bool, err error) {
	var src []byte
	if path == "-" {
		src, err = io.ReadAll(os.Stdin)
		path = "<stdin>"
		write = false
	} else {
		src, err = os.ReadFile(path)
	}
	if err != nil {
		return false, err
	}
	out, diags := lang.Format(path, src)
	if diags.HasErrors() {
		diag.WriteText(stderr, diags, diag.Sources{path: src})
		return false, errHasDiags
	}
	changed = !bytes.Equal(src, out)
	if list && changed {
		fmt.Fprintln(stdout, path)
	}
	if write {
		if !changed {
			return false, nil
		}
		info, err := os.Stat(path)
		if err != nil {
			return changed, err
		}
		return changed, writeFileAtomic(path, out, info.Mode().Perm())
	}
	if !list {
		_, err = stdout.Write(out)
	}
	return changed, err
}

// writeFileAtomic replaces path by writing a temporary file beside it and
// renaming it, so an interrupted `fmt -w` never leaves half a file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".fmt*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// expandMQB replaces each directory argument by the .mqb files under it.
func expandMQB(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if p == "-" || err == nil && !info.IsDir() {
			out = append(out, p)
			continue
		}
		if err != nil {
			return nil, err
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".mqb") {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
