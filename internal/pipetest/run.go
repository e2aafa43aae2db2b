package pipetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	_ "github.com/mattn/go-sqlite3" // the sqlite3 driver the sql sink writes with

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// inputName is the file the source reads, in the run's directory.
const inputName = "mqbtest-input"

// Run compiles the case's pipeline, runs its route in dir (an empty
// directory) over the case's input and checks every expectation. It
// returns one failure per expectation not met, each with its diff; err
// is for a case that cannot run at all (no such route, a kind that cannot
// be tested in-process).
func Run(ctx context.Context, c *Case, dir string) (failures []string, err error) {
	src, err := os.ReadFile(c.Pipeline)
	if err != nil {
		return nil, err
	}
	p, diags := compiler.CompileSources([]compiler.Source{{Name: c.Pipeline, Src: src}})
	if diags.HasErrors() {
		var b strings.Builder
		for _, d := range diags.Errors() {
			fmt.Fprintf(&b, "\n  %s:%d:%d: %s: %s", c.Pipeline, d.Range.Start.Line, d.Range.Start.Col, d.Code, d.Summary)
		}
		return nil, fmt.Errorf("%s does not build:%s", c.Pipeline, b.String())
	}
	route, err := pick(p, c)
	if err != nil {
		return nil, err
	}
	// The verdict is the real route's, whatever source the test feeds.
	verdict := compiler.VerdictText(route, false)
	if err := rewrite(&route, dir); err != nil {
		return nil, fmt.Errorf("route %s cannot be tested in-process: %w", route.Name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, inputName), c.Input, 0o644); err != nil {
		return nil, err
	}
	_, runErr := runtime.Run(ctx, plan.Plan{Routes: []plan.Route{route}}, runtime.Options{BaseDir: dir})
	if runErr != nil {
		failures = append(failures, "run: "+runErr.Error())
	}
	for _, e := range c.Expects {
		var got []string
		switch e.What {
		case "verdict":
			want := strings.TrimSpace(e.Want)
			gotText := route.Guarantee
			if strings.ContainsAny(want, " \n") {
				gotText = strings.TrimSpace(verdict)
			}
			if want != gotText {
				failures = append(failures, "expect verdict:\n"+diff(strings.Split(want, "\n"), strings.Split(gotText, "\n")))
			}
			continue
		case "sink":
			got, err = sinkRecords(route, dir, e)
		case "dlq":
			got, err = dlqRecords(route, dir)
		}
		label := "expect " + e.What
		if e.Target != "" {
			label += " " + e.Target
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", label, err))
			continue
		}
		want := canonical(lines([]byte(e.Want)))
		got = canonical(got)
		if !equal(want, got) {
			failures = append(failures, label+" (- want, + got):\n"+diff(want, got))
		}
	}
	return failures, nil
}

// pick returns the route the case names, or the only one.
func pick(p *plan.Plan, c *Case) (plan.Route, error) {
	var names []string
	for _, r := range p.Routes {
		if r.Name == c.Route || c.Route == "" && len(p.Routes) == 1 {
			return r, nil
		}
		names = append(names, r.Name)
	}
	if c.Route == "" {
		return plan.Route{}, fmt.Errorf("%s has %d routes (%s): name one with a `route: NAME` line", c.Pipeline, len(names), strings.Join(names, ", "))
	}
	return plan.Route{}, fmt.Errorf("%s has no route %s (it has %s)", c.Pipeline, c.Route, strings.Join(names, ", "))
}

// rewrite points the route at the test's input and keeps every path it
// writes inside dir: relative paths resolve against dir (the runtime's
// BaseDir), absolute ones are moved there by their base name. Whatever
// the source's kind, a file source reading the input to its end takes
// its place, in the source's format; the premises about the records the
// real source reads (a producer-stamped id, increasing _ids) are not
// checked, since the input stands in for what it would read. Only sinks
// that run embedded are allowed.
func rewrite(r *plan.Route, dir string) error {
	if len(r.Nodes) == 0 || r.Nodes[0].Role != plan.RoleSource {
		return fmt.Errorf("no source")
	}
	srcNode := &r.Nodes[0]
	attrs := map[string]plan.Value{
		"path": {Type: plan.TString, Str: filepath.Join(dir, inputName)},
		"mode": {Type: plan.TEnum, Str: "consume"}, // read the input to its end, then stop
	}
	if f, ok := srcNode.Attrs["format"]; ok {
		attrs["format"] = f
	}
	if srcNode.Kind == "file" {
		// A file source keeps what else it says (max_record_bytes,
		// source_metadata…) but its path and mode.
		for k, v := range srcNode.Attrs {
			if _, set := attrs[k]; !set && k != "checkpoint_store" {
				attrs[k] = v
			}
		}
	}
	srcNode.Kind, srcNode.Attrs = "file", attrs
	r.Premises = slices.DeleteFunc(slices.Clone(r.Premises), func(p plan.Premise) bool { return p.Node == srcNode.ID })
	for i := range r.Nodes {
		if err := keepInside(&r.Nodes[i], i == 0); err != nil {
			return err
		}
	}
	return nil
}

func keepInside(n *plan.Node, source bool) error {
	if n.Role != plan.RoleStep || n.Kind == "dlq" {
		switch n.Kind {
		case "file", "sql", "dlq", "switch", "fanout", "request":
		default:
			return fmt.Errorf("%s at %s:%d is a %s endpoint; only file and sqlite:// sql endpoints (and switch, fanout and request over them) run in-process", n.Role, n.Pos.File, n.Pos.Line, n.Kind)
		}
	}
	for k, v := range n.Attrs {
		if v.Type != plan.TString || source && k == "path" {
			continue
		}
		switch {
		case n.Kind == "file" && k == "path":
			if filepath.IsAbs(v.Str) {
				v.Str = filepath.Base(v.Str)
			}
		case n.Kind == "sql" && k == "url", strings.HasSuffix(k, "store"):
			scheme, rest, _ := strings.Cut(v.Str, "://")
			if scheme != "sqlite" && scheme != "pebble" {
				return fmt.Errorf("%s %s = %q at %s:%d is not embedded; only sqlite:// databases and pebble:// stores run in-process", n.Kind, k, plan.RedactURLs(v.Str), n.Pos.File, n.Pos.Line)
			}
			if filepath.IsAbs(rest) {
				v.Str = scheme + "://" + filepath.Base(rest)
			}
		}
		n.Attrs[k] = v
	}
	for i := range n.Children {
		if err := keepInside(&n.Children[i].Node, false); err != nil {
			return err
		}
	}
	return nil
}

// sinkRecords reads what the sink e names holds: a file sink's lines (the
// part files' in name order under name_by = source_position), or the rows
// of e's query over an sql sink's database, each a JSON object.
func sinkRecords(r plan.Route, dir string, e Expect) ([]string, error) {
	n, err := pickSink(r, e)
	if err != nil {
		return nil, err
	}
	switch n.Kind {
	case "file":
		if e.Query != "" {
			return nil, fmt.Errorf("%s is a file sink: write -- expect sink%s -- without a query", n.Attrs["path"].Str, strings.TrimRight(" "+e.Target, " "))
		}
		return fileLines(filepath.Join(dir, n.Attrs["path"].Str))
	case "sql":
		if e.Query == "" {
			return nil, fmt.Errorf("the sink is sql: name the rows to compare, -- expect sink%s: SELECT … ORDER BY … --", strings.TrimRight(" "+e.Target, " "))
		}
		return queryRows(filepath.Join(dir, strings.TrimPrefix(n.Attrs["url"].Str, "sqlite://")), e.Query)
	}
	return nil, fmt.Errorf("a %s sink cannot be read back", n.Kind)
}

// sinkEndpoints are the endpoints the route's `to` writes to: the sink
// itself, or the file and sql endpoints in the branches of its switch,
// fanout or request, in the order written.
func sinkEndpoints(r plan.Route) []*plan.Node {
	var out []*plan.Node
	var walk func(n *plan.Node)
	walk = func(n *plan.Node) {
		if len(n.Children) == 0 {
			out = append(out, n)
		}
		for i := range n.Children {
			walk(&n.Children[i].Node)
		}
	}
	for i := range r.Nodes {
		if r.Nodes[i].Role == plan.RoleSink {
			walk(&r.Nodes[i])
		}
	}
	return out
}

// target is how a test names an endpoint: a file's path, an sql url.
func target(n *plan.Node) string {
	if n.Kind == "sql" {
		return n.Attrs["url"].Str
	}
	return n.Attrs["path"].Str
}

// pickSink finds the endpoint an expect sink section reads: the one its
// target names, else the only sink there is, the only sql database a
// query can read, or the only file sink.
func pickSink(r plan.Route, e Expect) (*plan.Node, error) {
	all := sinkEndpoints(r)
	if len(all) == 0 {
		return nil, fmt.Errorf("the route has no sink")
	}
	var names []string
	for _, n := range all {
		if t := target(n); !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	if e.Target != "" {
		// An absolute path was moved into the run's directory by its base
		// name (keepInside); the test names it as the .mqb file does.
		want := e.Target
		if scheme, rest, ok := strings.Cut(want, "://"); ok && filepath.IsAbs(rest) {
			want = scheme + "://" + filepath.Base(rest)
		} else if filepath.IsAbs(want) {
			want = filepath.Base(want)
		}
		for _, n := range all {
			if t := target(n); t == want || n.Kind == "sql" && t == "sqlite://"+want {
				return n, nil
			}
		}
		return nil, fmt.Errorf("the route writes no sink %s (it writes %s)", e.Target, strings.Join(names, ", "))
	}
	if len(names) == 1 {
		return all[0], nil
	}
	want := "file"
	if e.Query != "" {
		want = "sql"
	}
	var found *plan.Node
	for _, n := range all {
		if n.Kind != want {
			continue
		}
		if found != nil && target(found) != target(n) {
			found = nil
			break
		}
		found = n
	}
	if found != nil {
		return found, nil
	}
	example := "-- expect sink " + names[0] + " --"
	if e.Query != "" {
		example = "-- expect sink sqlite://….db: SELECT … --"
	}
	return nil, fmt.Errorf("the route writes %d sinks (%s): name the one to read, %s", len(names), strings.Join(names, ", "), example)
}

// dlqRecords reads the route's DLQ file: each entry as {"error", "payload"}
// (or "raw" for a payload that is not JSON).
func dlqRecords(r plan.Route, dir string) ([]string, error) {
	for _, n := range r.Nodes {
		if n.Kind != "dlq" || len(n.Children) == 0 {
			continue
		}
		to := n.Children[0].Node
		if to.Kind != "file" {
			return nil, fmt.Errorf("the dlq writes to %s; a test reads back a file dlq only", to.Kind)
		}
		ls, err := fileLines(filepath.Join(dir, to.Attrs["path"].Str))
		if err != nil {
			return nil, err
		}
		out := make([]string, len(ls))
		for i, l := range ls {
			var env struct {
				Error   string          `json:"error"`
				Payload json.RawMessage `json:"payload,omitempty"`
				Raw     string          `json:"raw,omitempty"`
				Base64  string          `json:"raw_base64,omitempty"`
			}
			if err := json.Unmarshal([]byte(l), &env); err != nil {
				return nil, fmt.Errorf("dlq line %d: %v", i+1, err)
			}
			b, _ := json.Marshal(env)
			out[i] = string(b)
		}
		return out, nil
	}
	return nil, fmt.Errorf("the route has no dlq")
}

// fileLines reads a file's lines, or those of every file in a directory
// in name order; a file never written holds none.
func fileLines(path string) ([]string, error) {
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if st.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = files[:0]
		for _, e := range ents {
			if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		sort.Strings(files)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, lines(b)...)
	}
	return out, nil
}

// queryRows runs query on the sqlite database at path, each row a JSON
// object of its columns.
func queryRows(path, query string) ([]string, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		obj := make(map[string]any, len(cols))
		for i, c := range cols {
			if b, ok := vals[i].([]byte); ok {
				vals[i] = string(b)
			}
			obj[c] = vals[i]
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	return out, rows.Err()
}
