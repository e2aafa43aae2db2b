package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// The shapes below were added with unnest and parse. A case draws them from
// a stream of its own (the case's tx), only when its routes read the plain
// file in consume mode, so a seed that does not draw them keeps its input
// and its routes exactly as before.

// textForms are the dialects a transforms case writes some of its lines
// in: json leaves the JSON lines as they are.
var textForms = []string{"json", "json", "logfmt", "csv"}

// csvColumns name the fields of a line written as CSV, in order.
var csvColumns = []string{"id", "seq", "qty", "big", "region", "body", "tag"}

// regexPattern reads the fields the sinks use out of a JSON line as the
// data writes it; a line of another shape does not match (DLQ).
const regexPattern = `"id":"(?P<id>[^"]*)","seq":(?P<seq>[0-9]+),"qty":(?P<qty>[0-9]+),"big":(?P<big>[0-9]+),"region":"(?P<region>[^"]*)","body":"(?P<body>[^"]*)"`

// transforms turns the shapes on; a test turns them off to see the seeds
// that do not draw them unchanged.
var transforms = true

// onlyTransforms (the -transforms flag) checks only the seeds that draw
// them.
var onlyTransforms bool

// pickTransforms draws whether the case's routes may parse text and unnest
// an array, and rewrites the input for them: an items array on some
// records (empty ones, and a value that is not an array), and some lines in
// the case's text form.
func pickTransforms(c *Case) {
	tx := rand.New(rand.NewPCG(c.Seed, 0x7a5f))
	// CI's fixed seeds (1 to 10) and the recorded cases stay as they were.
	if !transforms || c.Seed <= 10 || c.Mode != "" || c.Broker != "" || tx.IntN(100) >= 30 {
		return
	}
	c.tx = tx
	c.textForm = textForms[tx.IntN(len(textForms))]
	c.Input = transformInput(tx, c.Input, c.textForm)
}

// transformInput rewrites each JSON object line of input; an exact repeat
// of a line is rewritten as its first copy was, so it stays a repeat.
func transformInput(tx *rand.Rand, input, form string) string {
	done := map[string]string{}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(input, "\n"), "\n") {
		out, ok := done[line]
		if !ok {
			out = transformLine(tx, line, form)
			done[line] = out
		}
		b.WriteString(out)
		b.WriteByte('\n')
	}
	return b.String()
}

func transformLine(tx *rand.Rand, line, form string) string {
	var rec map[string]any
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	if !strings.HasPrefix(line, "{") || d.Decode(&rec) != nil {
		return line // malformed: stays malformed
	}
	if form != "json" && tx.IntN(100) < 50 {
		return textLine(rec, form)
	}
	if tx.IntN(100) >= 45 {
		return line
	}
	var items string
	switch r := tx.IntN(100); {
	case r < 8:
		items = `"x"` // not an array: the unnest dead-letters the record
	case r < 12:
		items = `null`
	case r < 27:
		items = `[]` // nothing to emit: the parent counts as filtered
	default:
		var els []string
		for i := range 1 + tx.IntN(3) {
			el := fmt.Sprintf(`"qty":%d,"region":%q,"body":"%s-%d"`, 1+tx.IntN(9), []string{"eu", "us"}[tx.IntN(2)], rec["body"], i)
			if id, ok := rec["id"]; ok {
				el = fmt.Sprintf(`"id":"%v/%d",`, id, i) + el
			}
			els = append(els, "{"+el+"}")
		}
		items = "[" + strings.Join(els, ",") + "]"
	}
	return strings.TrimSuffix(line, "}") + `,"items":` + items + "}"
}

// textLine writes a record's flat fields as a logfmt or a CSV line.
func textLine(rec map[string]any, form string) string {
	var b bytes.Buffer
	for i, k := range csvColumns {
		v, ok := rec[k]
		s := ""
		if ok {
			s = fmt.Sprint(v)
		}
		switch {
		case form == "csv" && i > 0:
			b.WriteString("," + s)
		case form == "csv":
			b.WriteString(s)
		case ok:
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s=%s", k, s)
		}
	}
	return b.String()
}

// fromFile is the file source of a route of a transforms case: some read
// text lines, which the route then parses.
func (g *routeGen) fromFile() (from, parse string) {
	tx := g.c.tx
	if tx.IntN(100) >= 55 {
		return "from file { path = \"in.jsonl\" }\n", ""
	}
	format := g.c.textForm
	switch r := tx.IntN(100); {
	case r < 20:
		format = "regex"
	case r < 35:
		format = "json"
	}
	switch format {
	case "regex":
		parse = fmt.Sprintf("parse { format = regex, pattern = %q }\n", regexPattern)
	case "csv":
		parse = fmt.Sprintf("parse { format = csv, columns = [\"%s\"] }\n", strings.Join(csvColumns, `", "`))
	default:
		parse = fmt.Sprintf("parse { format = %s }\n", format)
	}
	return "from file { path = \"in.jsonl\", format = text }\n", parse
}

// unnestStep draws, for some routes of a transforms case, an unnest of the
// items array, with an id step before it for some (the derived identity is
// then stable). It returns "" when the route has a dedup already (E060).
func (g *routeGen) unnestStep() string {
	tx := g.c.tx
	if tx.IntN(100) >= 50 || g.deduped {
		return ""
	}
	var b strings.Builder
	if !g.idSet && tx.IntN(100) < 50 {
		expr := []string{`payload.id`, `"${payload.id}-${payload.seq}"`}[tx.IntN(2)]
		g.idSet, g.idVolatile = true, g.volatile["id"] || g.volatile["seq"]
		b.WriteString("id " + expr + "\n")
	}
	// The derived identity is the parent's id, else its message_id (fresh
	// per read of a file).
	if !g.idSet {
		g.idSet, g.idVolatile = true, true
	}
	if tx.IntN(2) == 0 {
		b.WriteString("unnest payload.items as item\n")
	} else {
		// The element becomes the payload: the fields map wrote are gone.
		b.WriteString("unnest payload.items\n")
		g.volatile = map[string]bool{}
	}
	return b.String()
}
