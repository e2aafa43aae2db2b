// Package pipetest runs the declarative pipeline tests of `mqbc test`: a
// .mqbtest file names a pipeline and one of its routes, gives the records
// its source reads, and says what each of its sinks and the DLQ must hold
// after a run and which verdict the compiler must give. The route runs
// in-process against the real embedded sinks, in a temporary directory:
// whatever its source's kind, a file source reading the test's input
// takes its place, and every relative path it writes (files, sqlite://
// databases, pebble:// stores) lands in that directory.
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
	// Target names, for a sink section, which of the route's sinks it
	// reads when the route has several (a switch, a fanout, a request): a
	// file sink's path or an sql sink's url, as the .mqb file writes it
	// (`-- expect sink out/new --`); empty when the sink is the only one
	// of its sort.
	Target string
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
// `-- expect sink --` (or `-- expect sink: SELECT … --`, each optionally
// naming one of several sinks: `-- expect sink out/new --`,
// `-- expect sink sqlite://x.db: SELECT … --`), `-- expect dlq --` and
// `-- expect verdict --`.
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
		case name == "expect dlq" || name == "expect verdict":
			c.Expects = append(c.Expects, Expect{What: strings.TrimPrefix(name, "expect "), Want: string(f.Data)})
		case name == "expect sink" || strings.HasPrefix(name, "expect sink ") || strings.HasPrefix(name, "expect sink:"):
			target, q, err := sinkSection(strings.TrimPrefix(name, "expect sink"))
			if err != nil {
				return nil, fmt.Errorf("%s: section %q: %w", path, name, err)
			}
			c.Expects = append(c.Expects, Expect{What: "sink", Target: target, Query: q, Want: string(f.Data)})
		default:
			return nil, fmt.Errorf("%s: unknown section %q (sections are input, expect sink [TARGET][: SELECT …], expect dlq, expect verdict)", path, name)
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

// sinkSection reads what follows `expect sink` in a section name: an
// optional target (a path, or a url whose "://" is no separator), then
// optionally `:` and the SELECT whose rows are compared.
func sinkSection(rest string) (target, query string, err error) {
	for i := 0; i < len(rest); i++ {
		if rest[i] != ':' || strings.HasPrefix(rest[i:], "://") {
			continue
		}
		target, query = strings.TrimSpace(rest[:i]), strings.TrimSpace(rest[i+1:])
		if !strings.HasPrefix(strings.ToUpper(query), "SELECT ") {
			return "", "", fmt.Errorf("after `expect sink:` comes a SELECT")
		}
		return target, query, nil
	}
	return strings.TrimSpace(rest), "", nil
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
