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
	// The framing is Plan's two fields, version and routes, as
	// encoding/json writes them (write_test.go holds it to json.Marshal
	// and json.MarshalIndent).
	open, sep, nl, prefix := `{"version":`, `,"routes":`, "", ""
	if indent {
		open, sep, nl, prefix = "{\n  \"version\": ", ",\n  \"routes\": ", "\n", "    "
	}
	version, err := json.Marshal(p.Version)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	// Each route is encoded into one reused buffer (json.Marshal would
	// copy each out into a new slice); Encode ends it with a newline,
	// which is not written.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if indent {
		enc.SetIndent(prefix, "  ")
	}
	bw.WriteString(open)
	bw.Write(version)
	bw.WriteString(sep)
	if len(p.Routes) == 0 {
		// Redacted makes the slice, so even a nil one is written [].
		bw.WriteString("[]")
	} else {
		bw.WriteString("[" + nl + prefix)
		for i, r := range p.Routes {
			buf.Reset()
			if err := enc.Encode(r.redactedShared()); err != nil {
				return err
			}
			if i > 0 {
				bw.WriteString("," + nl + prefix)
			}
			bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		}
		if indent {
			bw.WriteString("\n  ")
		}
		bw.WriteString("]")
	}
	bw.WriteString(nl + "}\n")
	// bufio keeps the first write error and returns it here.
	return bw.Flush()
}
