package plan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// WriteJSON writes p to w as JSON followed by a newline, each route
// redacted as Route.Redacted does just before it is encoded: compact, one line,
// by default, the form `mqbc build` writes for `mqbc run` and other
// programs; with indent, two spaces a level, for people. The bytes are
// those of json.Marshal (json.MarshalIndent with indent) of p.Redacted(),
// but the plan is encoded a route at a time through a buffer, so neither
// a redacted copy of the whole plan nor its whole text is held in memory
// (10,000 routes make some 30 MB of JSON).
func (p Plan) WriteJSON(w io.Writer, indent bool) error {
	pw := NewWriter(w, p.Version, indent)
	for _, r := range p.Routes {
		if err := pw.Route(r); err != nil {
			return err
		}
	}
	return pw.Close()
}

// Writer writes a plan as WriteJSON does, given its routes one by one, so
// a build can write each route as it is compiled and keep none of them.
type Writer struct {
	bw      *bufio.Writer
	version int
	frame   framing
	routes  int
	indent  bool
	// A compact route is encoded by appendRoute into one reused buffer,
	// out; an indented one by enc into buf (Encode ends it with a
	// newline, which is not written).
	out []byte
	buf bytes.Buffer
	enc *json.Encoder
	err error
}

// framing is the text around the routes, Plan's two fields as
// encoding/json writes them (write_test.go holds it to json.Marshal and
// json.MarshalIndent), compact and indented.
type framing struct {
	open, sep     string // before the version, between it and the routes
	first, next   string // before the first route, before each other
	last, noRoute string // after the last route; after [] when there is none
}

var (
	compactFraming = framing{`{"version":`, `,"routes":`, "[", ",", "]}\n", "}\n"}
	indentFraming  = framing{"{\n  \"version\": ", ",\n  \"routes\": ", "[\n    ", ",\n    ", "\n  ]\n}\n", "\n}\n"}
)

// NewWriter starts a plan of the given version on w; Close ends it.
func NewWriter(w io.Writer, version int, indent bool) *Writer {
	pw := &Writer{bw: bufio.NewWriterSize(w, 64<<10), version: version, frame: compactFraming, indent: indent}
	if indent {
		pw.frame = indentFraming
		pw.enc = json.NewEncoder(&pw.buf)
		pw.enc.SetIndent("    ", "  ")
	}
	return pw
}

// start writes what comes before the first route.
func (pw *Writer) start() {
	version, err := json.Marshal(pw.version)
	if err != nil {
		pw.err = err
		return
	}
	pw.bw.WriteString(pw.frame.open)
	pw.bw.Write(version)
	pw.bw.WriteString(pw.frame.sep)
}

// Route writes r, redacted as Route.Redacted does, as the plan's next
// route.
func (pw *Writer) Route(r Route) error {
	if pw.err != nil {
		return pw.err
	}
	between := pw.frame.next
	if pw.routes == 0 {
		if pw.start(); pw.err != nil {
			return pw.err
		}
		between = pw.frame.first
	}
	red := r.redactedShared()
	var text []byte
	if pw.indent {
		pw.buf.Reset()
		if err := pw.enc.Encode(red); err != nil {
			pw.err = err
			return err
		}
		text = bytes.TrimSuffix(pw.buf.Bytes(), []byte("\n"))
	} else {
		var err error
		if pw.out, err = appendRoute(pw.out[:0], &red); err != nil {
			pw.err = err
			return err
		}
		text = pw.out
	}
	pw.routes++
	pw.bw.WriteString(between)
	pw.bw.Write(text)
	return nil
}

// Close ends the plan and flushes it: it returns the first error met
// writing it.
func (pw *Writer) Close() error {
	if pw.err != nil {
		return pw.err
	}
	if pw.routes == 0 {
		// Redacted makes the slice, so even a nil one is written [].
		if pw.start(); pw.err != nil {
			return pw.err
		}
		pw.bw.WriteString("[]" + pw.frame.noRoute)
	} else {
		pw.bw.WriteString(pw.frame.last)
	}
	// bufio keeps the first write error and returns it here.
	return pw.bw.Flush()
}
