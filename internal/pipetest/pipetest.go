// Package pipetest runs the declarative pipeline tests of `mqbc test`: a
// .mqbtest file names a pipeline and one of its routes, gives the records
// its source reads, and says what the sink and the DLQ must hold after a
// run and which verdict the compiler must give. The route runs in-process
// against the real embedded sinks, in a temporary directory: its source
// reads the test's input, and every relative path it writes (files,
// sqlite:// databases, pebble:// stores) lands in that directory.
package pipetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/txtar"
)

// Case is one .mqbtest file.
type Case struct {
	// Path is the test file; Pipeline the .mqb file it tests, relative to
	// the test file's directory when it is not absolute.
	Path, Pipeline string
	// Route names the route under test; empty when the pipeline has one.
	Route string
	// Input is the source's records, one per line, as its file holds them.
	Input []byte
	// Expects are the expect sections in the order written.
	Expects []Expect
}

// Expect is one `-- expect … --` section.
type Expect struct {
	// What is sink, dlq or verdict.
	What string
	// Query is, for a sink section over an sql sink, the SELECT whose rows
	// are compared (`-- expect sink: SELECT id, body FROM t ORDER BY id --`).
	Query string
	// Want is the section's text.
	Want string
}

// Load reads and checks a .mqbtest file.
func Load(path string) (*Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse reads a .mqbtest file's text: a txtar archive whose comment holds
// `pipeline: FILE` and optionally `route: NAME` lines (other lines are
// the test's description), with an `-- input --` section and any of
// `-- expect sink --` (or `-- expect sink: SELECT … --`),
// `-- expect dlq --` and `-- expect verdict --`.
func Parse(path string, data []byte) (*Case, error) {
	ar := txtar.Parse(data)
	c := &Case{Path: path}
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "pipeline":
			c.Pipeline = strings.TrimSpace(v)
		case "route":
			c.Route = strings.TrimSpace(v)
		}
	}
	if c.Pipeline == "" {
		return nil, fmt.Errorf("%s: no `pipeline: FILE.mqb` line before the first section", path)
	}
	if !filepath.IsAbs(c.Pipeline) {
		c.Pipeline = filepath.Join(filepath.Dir(path), c.Pipeline)
	}
	sawInput := false
	for _, f := range ar.Files {
		name := strings.TrimSpace(f.Name)
		switch {
		case name == "input":
			if sawInput {
				return nil, fmt.Errorf("%s: two input sections", path)
			}
			c.Input, sawInput = f.Data, true
		case name == "expect sink" || name == "expect dlq" || name == "expect verdict":
			c.Expects = append(c.Expects, Expect{What: strings.TrimPrefix(name, "expect "), Want: string(f.Data)})
		case strings.HasPrefix(name, "expect sink:"):
			q := strings.TrimSpace(strings.TrimPrefix(name, "expect sink:"))
			if !strings.HasPrefix(strings.ToUpper(q), "SELECT ") {
				return nil, fmt.Errorf("%s: section %q: after `expect sink:` comes a SELECT", path, name)
			}
			c.Expects = append(c.Expects, Expect{What: "sink", Query: q, Want: string(f.Data)})
		default:
			return nil, fmt.Errorf("%s: unknown section %q (sections are input, expect sink, expect sink: SELECT …, expect dlq, expect verdict)", path, name)
		}
	}
	if !sawInput {
		return nil, fmt.Errorf("%s: no -- input -- section", path)
	}
	if len(c.Expects) == 0 {
		return nil, fmt.Errorf("%s: nothing is expected: add an -- expect sink --, -- expect dlq -- or -- expect verdict -- section", path)
	}
	return c, nil
}

// lines splits text into its non-empty lines.
func lines(b []byte) []string {
	var out []string
	for _, l := range bytes.Split(b, []byte("\n")) {
		if s := strings.TrimRight(string(l), "\r"); strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}
