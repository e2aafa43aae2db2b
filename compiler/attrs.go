package compiler

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// attrInfo is a checked attribute value plus what the proof needs.
type attrInfo struct {
	val      plan.Value
	parts    []partInfo // template placeholders and literals, in order
	stab     stability
	explicit bool // written in the file rather than defaulted
	rng      diag.Range
}

// partInfo is one piece of a template with its stability.
type partInfo struct {
	lit    string
	expr   string
	isExpr bool
	stab   stability
}

// checkAttrs checks the items of block against decls, reports unknown,
// duplicate, mistyped and missing attributes, and fills defaults. nested,
// when not nil, claims items that are nested endpoints rather than
// attributes (switch cases, request call/forward, fanout targets).
func (rc *routeCtx) checkAttrs(decls []stdlib.Attr, block *lang.Block, owner string, at diag.Range, nested func(*lang.Item) bool) map[string]*attrInfo {
	out := make(map[string]*attrInfo, len(decls))
	seen := map[string]bool{}
	misplaced := map[string]bool{} // keys E028 refused: not also missing
	for it := range block.EachItem() {
		if rc.c.misplaced[it] {
			misplaced[it.Key.Name] = true
			continue
		}
		key := it.Key.Name
		if nested != nil && nested(it) {
			continue
		}
		a := findAttr(decls, key)
		if a == nil {
			names := make([]string, 0, len(decls))
			for _, d := range decls {
				names = append(names, d.Name)
			}
			detail := didYouMean(key, names)
			if len(names) == 0 {
				detail = joinDetail(detail, owner+" takes no attributes.")
			} else if detail == "" {
				detail = owner + " takes " + joinNames(names) + "."
			}
			rc.c.add("E013", it.Key.Range(), fmt.Sprintf("%s%s has no attribute %q", owner, rc.where(), key), detail)
			continue
		}
		if seen[key] {
			rc.c.add("E018", it.Key.Range(), fmt.Sprintf("%s%s sets %s twice", owner, rc.where(), key), "Only one value can win, so neither does: delete one.")
			continue
		}
		seen[key] = true
		if it.Assign == nil && a.Type == stdlib.Block && it.Body != nil && it.Kind == nil && it.Label == nil {
			// `columns { id = payload.id }` is the block written without `=`.
			it = &lang.Item{Pos: it.Pos, EndPos: it.EndPos, Key: it.Key, Assign: &lang.Value{Pos: it.Body.Pos, EndPos: it.Body.EndPos, Block: it.Body}}
		}
		if it.Assign == nil {
			rc.c.add("E015", it.Key.Range(), fmt.Sprintf("%s.%s needs a value: %s = …", owner, key, key), "")
			continue
		}
		if a.Deprecated != "" && !rc.inNamedUnused {
			rc.warn("W007", it.Key.Range(), fmt.Sprintf("%s.%s is deprecated; write %s", owner, key, a.Deprecated),
				fmt.Sprintf("`%s = true|false` is the old spelling of `%s = source_position|write_time`; an explicit %s wins.", key, a.Deprecated, a.Deprecated))
		}
		ai, ok := rc.convertValue(a, it.Assign, owner)
		if !ok {
			continue
		}
		ai.explicit = true
		ai.rng = it.Range()
		ai.val.Secret = a.SecretValue
		if a.SecretValue && literalText(ai.val) && !rc.inNamedUnused {
			rc.warn("W008", it.Assign.Range(), fmt.Sprintf("%s.%s is written in the file", owner, key),
				fmt.Sprintf("Read it from the environment: %s = \"${env(\\\"NAME\\\")}\".", key))
		}
		out[key] = ai
	}
	// The defaults are made in one array of one for each declaration not
	// set that has a default, counted first: it is never grown, so the
	// pointers into it hold, and a kind of many attributes of which few
	// have defaults does not allocate a record for each of them.
	unset := func(a *stdlib.Attr) bool {
		_, ok := out[a.Name]
		return !ok && !seen[a.Name] && !misplaced[a.Name]
	}
	n := 0
	for i := range decls {
		if a := &decls[i]; a.Default != nil && !a.Required && unset(a) {
			n++
		}
	}
	var defaults []attrInfo
	for i := range decls {
		a := &decls[i]
		if !unset(a) {
			continue
		}
		if a.Required {
			rc.c.add("E016", at, fmt.Sprintf("%s%s needs attribute %s", owner, rc.where(), a.Name), strings.TrimSuffix(a.Doc, ".")+".")
			continue
		}
		if a.Default == nil {
			continue
		}
		if defaults == nil {
			defaults = make([]attrInfo, 0, n)
		}
		if ai, ok := rc.defaultValue(a, at); ok {
			defaults = append(defaults, ai)
			out[a.Name] = &defaults[len(defaults)-1]
		}
	}
	return out
}

// checkEnds reports an attribute written at the end of its kind that does
// not read it (`to kafka { group_id = … }`): that end would ignore it, so
// what the user asked for would silently not happen. It is dropped from
// the node either way.
func (rc *routeCtx) checkEnds(n *nodeInfo, source bool) {
	end, other := stdlib.EndSink, stdlib.EndSource
	if source {
		end, other = stdlib.EndSource, stdlib.EndSink
	}
	for _, a := range n.kind.Attrs {
		ai := n.attrs[a.Name]
		if a.End != other || ai == nil {
			continue
		}
		delete(n.attrs, a.Name)
		if !ai.explicit {
			continue
		}
		var names []string
		for _, b := range n.kind.Attrs {
			if b.End != other {
				names = append(names, b.Name)
			}
		}
		rc.c.add("E013", ai.rng, fmt.Sprintf("%s %s%s has no attribute %q: it applies to a %s %s", n.kind.Name, end, rc.where(), a.Name, n.kind.Name, other),
			fmt.Sprintf("A %s %s ignores %s. A %s %s takes %s.", n.kind.Name, end, a.Name, n.kind.Name, end, joinNames(names)))
	}
}

// checkStdio refuses what would not do what it says with standard input
// and output: a file named "-" (which is a file called -, not stdin or
// stdout) and a second route reading stdin (one stream, one reader).
func (rc *routeCtx) checkStdio(n *nodeInfo) {
	if rc.inNamedUnused {
		return
	}
	if ai := n.attrs["path"]; n.kind.Name == "file" && ai != nil && ai.explicit && strings.TrimSpace(ai.val.Str) == "-" {
		rc.c.add("E022", ai.rng, fmt.Sprintf("file%s: path \"-\" would be a file named -", rc.where()),
			"Standard input and output are endpoints of their own: `from stdin {}` and `to stdout {}`.")
	}
	if n.kind.Name == "stdin" && n.role == plan.RoleSource {
		if rc.c.stdinRoute != "" && rc.c.stdinRoute != rc.name {
			rc.c.add("E022", n.rng, fmt.Sprintf("route %s reads stdin, which route %s reads already", rc.name, rc.c.stdinRoute),
				"A run has one standard input and one route reads it; write it to a file to read it twice.")
			return
		}
		rc.c.stdinRoute = rc.name
	}
}

// checkFileGlob notes a file source whose path names many files (a glob
// or a directory) and refuses what cannot read one: a malformed pattern,
// and group_subscribe, which follows one file through renames (a file
// renamed within the glob would be another of its files).
func (rc *routeCtx) checkFileGlob(n *nodeInfo) {
	ai := n.attrs["path"]
	if n.kind.Name != "file" || ai == nil || !stdlib.FilePathNamesMany(ai.val.Str) {
		return
	}
	rc.srcGlob = ai.val.Str
	if rc.inNamedUnused {
		return
	}
	if err := stdlib.CheckFileGlob(ai.val.Str); err != nil {
		rc.c.add("E022", ai.rng, fmt.Sprintf("file%s: path %q is a malformed glob pattern: %v", rc.where(), ai.val.Str, err),
			"A pattern uses * ? and [ranges] as Go's filepath.Match reads them; a path ending in / reads every file of a directory.")
	}
	if m := n.attrs["mode"]; m != nil && m.val.Str == "group_subscribe" {
		rc.c.add("E052", m.rng, fmt.Sprintf("file%s: mode = group_subscribe cannot read a glob or a directory (path %q)", rc.where(), ai.val.Str),
			"group_subscribe follows one file through its rotations, finding it again by inode under its new name; under a glob that name is another file of the glob, read again. Read the files with mode = consume (each to its end, resuming in the file it stopped in) or subscribe, or give group_subscribe one file's path.")
	}
}

func findAttr(decls []stdlib.Attr, name string) *stdlib.Attr {
	for i := range decls {
		if decls[i].Name == name {
			return &decls[i]
		}
	}
	return nil
}

// defaultValue converts a stdlib default into a plan value; ok is false
// when there is none.
func (rc *routeCtx) defaultValue(a *stdlib.Attr, at diag.Range) (ai attrInfo, ok bool) {
	if a.Default == nil {
		return ai, false
	}
	ai = attrInfo{stab: stableValue, rng: at}
	switch a.Type {
	case stdlib.Duration:
		s, _ := a.Default.(string)
		d, err := lang.ParseDuration(s)
		if err != nil {
			panic(fmt.Sprintf("stdlib: bad default duration %q for %s", s, a.Name))
		}
		ai.val = plan.Value{Type: plan.TDuration, Str: s, Int: int64(d)}
	case stdlib.Expr, stdlib.Any:
		s, _ := a.Default.(string)
		ce, good := rc.compileExpr(s, diag.Pos{}, false, at, "E020", func() string { return "default of " + a.Name }, false)
		if !good {
			return ai, false
		}
		ai.stab = rc.stabilityOf(ce)
		ai.val = plan.Value{Type: plan.TExpr, Expr: s, Stable: ai.stab.Stable}
	case stdlib.Enum:
		ai.val = plan.Value{Type: plan.TEnum, Str: defaultText(a.Default)}
	case stdlib.String:
		ai.val = plan.Value{Type: plan.TString, Str: defaultText(a.Default)}
	case stdlib.Int:
		ai.val = plan.Value{Type: plan.TInt, Int: toInt64(a.Default)}
	case stdlib.Float:
		f, _ := a.Default.(float64)
		ai.val = plan.Value{Type: plan.TFloat, Float: f}
	case stdlib.Bool:
		b, _ := a.Default.(bool)
		ai.val = plan.Value{Type: plan.TBool, Bool: b}
	default:
		return ai, false
	}
	return ai, true
}

// defaultText is a default as text: a string as it is (fmt.Sprint would
// copy it for every node that takes it), anything else as fmt prints it.
func defaultText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}

// describe names what a value is, for "expects X, got Y".
func describe(v *lang.Value) string {
	switch {
	case v.List != nil:
		return "a list"
	case v.Block != nil:
		return "a block"
	case v.Expr != nil:
		if tok, ok := v.Expr.Single(); ok {
			switch tok.Type {
			case lang.TString, lang.TRaw:
				return "a string"
			case lang.TInt:
				return "an integer"
			case lang.TFloat:
				return "a number"
			case lang.TDuration:
				return "a duration"
			case lang.TIdent:
				if tok.Value == "true" || tok.Value == "false" {
					return "a boolean"
				}
				return "the name " + tok.Value
			}
		}
		return "an expression"
	}
	return "nothing"
}

var typeWords = map[stdlib.Type]string{
	stdlib.String: "a string", stdlib.Int: "an integer", stdlib.Float: "a number", stdlib.Bool: "true or false",
	stdlib.Duration: "a duration such as 500ms or 1h", stdlib.Enum: "one of", stdlib.Expr: "an expression",
	stdlib.List: "a list", stdlib.Block: "a block { name = <expr> … }", stdlib.Any: "an expression",
}

// convertValue checks v against a's declared type and converts it.
func (rc *routeCtx) convertValue(a *stdlib.Attr, v *lang.Value, owner string) (*attrInfo, bool) {
	pos := v.Range().Start
	ai := &attrInfo{stab: stableValue, rng: v.Range()}
	wrong := func(detail string) (*attrInfo, bool) {
		want := typeWords[a.Type]
		if a.Type == stdlib.Enum {
			want += " " + joinNames(a.Enum)
		}
		rc.c.add("E015", v.Range(), fmt.Sprintf("%s.%s%s expects %s, got %s", owner, a.Name, rc.where(), want, describe(v)), detail)
		return nil, false
	}
	var tok lang.Token
	single := false
	if v.Expr != nil {
		tok, single = v.Expr.Single()
	}
	switch a.Type {
	case stdlib.String:
		if !single || (tok.Type != lang.TString && tok.Type != lang.TRaw) {
			detail := ""
			if v.Expr != nil && strings.Contains(v.Expr.Text(rc.file.Src), "env(") && a.Template {
				detail = `Read an environment variable inside a template: "${env("NAME")}".`
			} else if single && tok.Type == lang.TIdent {
				detail = fmt.Sprintf("Quote it: %s = %q.", a.Name, tok.Value)
			}
			return wrong(detail)
		}
		return rc.convertString(a, tok, owner, ai)
	case stdlib.Int:
		if !single || tok.Type != lang.TInt {
			return wrong("")
		}
		n, err := lang.ParseInt(tok.Value)
		if err != nil {
			rc.c.add("E002", v.Range(), fmt.Sprintf("%s.%s: integer %s is out of range", owner, a.Name, tok.Value), "")
			return nil, false
		}
		ai.val = plan.Value{Type: plan.TInt, Int: n, Pos: pos}
	case stdlib.Float:
		if !single || (tok.Type != lang.TInt && tok.Type != lang.TFloat) {
			return wrong("")
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(tok.Value, "_", ""), 64)
		if err != nil {
			rc.c.add("E002", v.Range(), fmt.Sprintf("%s.%s: bad number %s", owner, a.Name, tok.Value), "")
			return nil, false
		}
		ai.val = plan.Value{Type: plan.TFloat, Float: f, Pos: pos}
	case stdlib.Bool:
		if !single || tok.Type != lang.TIdent || (tok.Value != "true" && tok.Value != "false") {
			return wrong("")
		}
		ai.val = plan.Value{Type: plan.TBool, Bool: tok.Value == "true", Pos: pos}
	case stdlib.Duration:
		if !single || tok.Type != lang.TDuration {
			detail := ""
			if single && (tok.Type == lang.TString || tok.Type == lang.TInt) {
				detail = "Write the duration without quotes and with a unit: 500ms, 30s, 1h."
			}
			return wrong(detail)
		}
		d, err := lang.ParseDuration(tok.Value)
		if err != nil {
			// The lexer has already reported the malformed duration (E002).
			return nil, false
		}
		ai.val = plan.Value{Type: plan.TDuration, Str: tok.Value, Int: int64(d), Pos: pos}
	case stdlib.Enum:
		if !single || tok.Type != lang.TIdent {
			detail := ""
			if single && tok.Type == lang.TString {
				detail = fmt.Sprintf("Write it without quotes: %s = %s.", a.Name, strings.Trim(tok.Value, `"'`))
			}
			return wrong(detail)
		}
		if !slices.Contains(a.Enum, tok.Value) {
			rc.c.add("E017", v.Range(), fmt.Sprintf("%s.%s%s cannot be %s; it is one of %s", owner, a.Name, rc.where(), tok.Value, joinNames(a.Enum)), didYouMean(tok.Value, a.Enum))
			return nil, false
		}
		ai.val = plan.Value{Type: plan.TEnum, Str: tok.Value, Pos: pos}
	case stdlib.Expr, stdlib.Any:
		if v.Expr == nil {
			return wrong("")
		}
		return rc.convertExpr(v.Expr, owner+"."+a.Name+rc.where(), ai, false)
	case stdlib.Block:
		if v.Block == nil {
			return wrong("")
		}
		ai.val = plan.Value{Type: plan.TBlock, Block: map[string]plan.Value{}, Pos: pos}
		for it := range v.Block.EachItem() {
			if it.Assign == nil || it.Assign.Expr == nil {
				rc.c.add("E015", it.Key.Range(), fmt.Sprintf("%s.%s.%s expects `= <expr>`", owner, a.Name, it.Key.Name), "")
				continue
			}
			if _, dup := ai.val.Block[it.Key.Name]; dup {
				rc.c.add("E018", it.Key.Range(), fmt.Sprintf("%s.%s sets %s twice", owner, a.Name, it.Key.Name), "")
				continue
			}
			sub, ok := rc.convertExpr(it.Assign.Expr, owner+"."+a.Name+"."+it.Key.Name+rc.where(), &attrInfo{stab: stableValue}, false)
			if ok {
				ai.val.Block[it.Key.Name] = sub.val
				ai.stab = both(ai.stab, sub.stab)
			}
		}
	case stdlib.List:
		if v.List == nil {
			return wrong("")
		}
		elem := stdlib.Attr{Name: a.Name, Type: a.Elem, Template: a.Template, Enum: a.Enum}
		ai.val = plan.Value{Type: plan.TList, List: []plan.Value{}, Pos: pos}
		for _, e := range v.List.Elems {
			sub, ok := rc.convertValue(&elem, e, owner)
			if ok {
				ai.val.List = append(ai.val.List, sub.val)
				ai.stab = both(ai.stab, sub.stab)
			}
		}
	default:
		return wrong("")
	}
	return ai, true
}

// convertString handles a String attribute: plain text, or a template
// whose placeholders each compile as expressions.
func (rc *routeCtx) convertString(a *stdlib.Attr, tok lang.Token, owner string, ai *attrInfo) (*attrInfo, bool) {
	parts, ds := lang.SplitTemplate(tok)
	rc.c.diags = append(rc.c.diags, ds...)
	if len(ds) > 0 {
		return nil, false
	}
	hasExpr := false
	for _, p := range parts {
		hasExpr = hasExpr || p.IsExpr()
	}
	pos := lang.Range(tok.Pos, tok.Pos).Start
	if !hasExpr {
		ai.val = plan.Value{Type: plan.TString, Str: parts[0].Lit, Pos: pos}
		for _, p := range parts[1:] {
			ai.val.Str += p.Lit
		}
		return ai, true
	}
	if !a.Template {
		for _, p := range parts {
			if p.IsExpr() {
				rc.c.add("E022", p.Range, fmt.Sprintf("%s.%s%s does not take ${…} placeholders", owner, a.Name, rc.where()),
					"Only attributes declared as templates evaluate placeholders (and env()); here the text would be used as written. Write the value literally, or escape the dollar as \\$.")
				return nil, false
			}
		}
	}
	ok := true
	ai.val = plan.Value{Type: plan.TTemplate, Pos: pos, Template: make([]plan.Part, 0, len(parts))}
	ai.parts = make([]partInfo, 0, len(parts))
	for _, p := range parts {
		if !p.IsExpr() {
			ai.val.Template = append(ai.val.Template, plan.Part{Lit: p.Lit})
			ai.parts = append(ai.parts, partInfo{lit: p.Lit, stab: stableValue})
			continue
		}
		mappable := p.Expr == p.Written && (tok.Type == lang.TRaw || !strings.ContainsAny(p.Written, `"\`))
		what := func() string {
			return fmt.Sprintf("placeholder ${%s} in %s.%s%s", p.Written, owner, a.Name, rc.where())
		}
		ce, good := rc.compileExpr(p.Expr, p.Range.Start, mappable, p.Range, "E021", what, false)
		if !good {
			ok = false
			continue
		}
		st := rc.stabilityOf(ce)
		ai.stab = both(ai.stab, st)
		ai.val.Template = append(ai.val.Template, plan.Part{Expr: p.Expr})
		ai.parts = append(ai.parts, partInfo{expr: p.Expr, isExpr: true, stab: st})
	}
	if !ok {
		return nil, false
	}
	ai.val.Stable = ai.stab.Stable
	return ai, true
}

// convertExpr compiles an expression-typed value. A string literal with
// ${…} placeholders (the mq-bridge spelling of a dedup key, say) is turned
// into the equivalent expression.
func (rc *routeCtx) convertExpr(e *lang.Expr, what string, ai *attrInfo, asBool bool) (*attrInfo, bool) {
	src := e.Text(rc.file.Src)
	at := e.Range().Start
	mappable := true
	if tok, ok := e.Single(); ok && (tok.Type == lang.TString || tok.Type == lang.TRaw) {
		parts, ds := lang.SplitTemplate(tok)
		if len(ds) == 0 && len(parts) > 0 && (len(parts) > 1 || parts[0].IsExpr()) {
			src = templateExpr(parts)
			mappable = false
		}
	}
	ce, ok := rc.compileExpr(src, at, mappable, e.Range(), "E020", func() string { return what }, asBool)
	if !ok {
		return nil, false
	}
	ai.stab = rc.stabilityOf(ce)
	ai.val = plan.Value{Type: plan.TExpr, Expr: src, Stable: ai.stab.Stable, Pos: at}
	return ai, true
}

// templateExpr rewrites template parts as one expr-lang expression.
func templateExpr(parts []lang.TemplatePart) string {
	if len(parts) == 1 {
		return parts[0].Expr
	}
	var terms []string
	for _, p := range parts {
		if p.IsExpr() {
			terms = append(terms, "string("+p.Expr+")")
		} else {
			terms = append(terms, strconv.Quote(p.Lit))
		}
	}
	return strings.Join(terms, " + ")
}

// lexTok rebuilds the token of a label string.
func lexTok(s *lang.Str) lang.Token {
	t := lang.TString
	if strings.HasPrefix(s.Raw, `"""`) {
		t = lang.TRaw
	}
	return lang.Token{Type: t, Value: s.Raw, Pos: s.Pos}
}

func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return "nothing"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func joinDetail(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + " " + b
}

// literalText reports whether v holds any literal text (beside its
// placeholders).
func literalText(v plan.Value) bool {
	if v.Str != "" {
		return true
	}
	for _, p := range v.Template {
		if p.Lit != "" {
			return true
		}
	}
	return false
}

// checkRunnable refuses attribute values the runtime cannot run, so what
// builds, runs: a url whose scheme the kind does not take or whose shape
// no connector can open, a format the kind's reader or writer lacks. It
// runs on a checked endpoint node and reports at the value.
func (rc *routeCtx) checkRunnable(n *nodeInfo) {
	if n == nil || n.kind == nil || n.broken {
		return
	}
	if ai := n.attrs["url"]; ai != nil && ai.explicit {
		rc.checkURL(n.kind, ai)
	}
	if ai := n.attrs["format"]; ai != nil && ai.explicit && ai.val.Type == plan.TEnum {
		rc.checkFormat(n, ai)
	}
}

// runnableFormats returns the formats the connector of kind implements
// in role, as stdlib declares them (Kind.Formats): the connector packages
// refuse the others at start-up; the file sink writes the payload as it
// is, one per line, and has no csv writer. It is an allow-list: a kind
// and role with no entry builds with nothing but its declared default
// (TestRunnableFormatsCoverEveryFormat fails when a kind declares format
// without an entry).
func runnableFormats(k *stdlib.Kind, role string) []string { return k.Formats[role] }

func (rc *routeCtx) checkFormat(n *nodeInfo, ai *attrInfo) {
	role := n.role
	if role == plan.RoleHandler && runnableFormats(n.kind, role) == nil {
		role = plan.RoleSink
	}
	ok := runnableFormats(n.kind, role)
	if ok == nil {
		if a := n.kind.Attr("format"); a != nil && a.Default != nil {
			ok = []string{fmt.Sprint(a.Default)}
		}
	}
	if slices.Contains(ok, ai.val.Str) {
		return
	}
	detail := fmt.Sprintf("The runtime's %s %s implements %s; anything else would fail at start-up.", n.kind.Name, role, joinNames(ok))
	if ai.val.Str == "csv" {
		if role == plan.RoleSource {
			detail += " There is no csv reader: read the file with format = text and turn each line into an object with a `parse { format = csv, columns = [\"a\", \"b\"] }` step."
		} else {
			detail += " There is no csv writer: the sink writes each payload as it is, one per line."
		}
	}
	rc.c.add("E026", rc.valueRange(ai), fmt.Sprintf("%s%s: the %s %s cannot run format = %s; it takes %s", n.kind.Name, rc.where(), n.kind.Name, role, ai.val.Str, joinOr(ok)), detail)
}

// valueRange is the range of an attribute's value (the item's range from
// the value's first byte).
func (rc *routeCtx) valueRange(ai *attrInfo) diag.Range {
	r := ai.rng
	if ai.val.Pos.IsValid() {
		r.Start = ai.val.Pos
	}
	if ai.val.Type == plan.TEnum && r.Start.Line == r.End.Line {
		r.End.Col, r.End.Offset = r.Start.Col+len(ai.val.Str), r.Start.Offset+len(ai.val.Str)
	}
	return r
}

// urlShape says what a url of one scheme needs beyond its scheme to be
// opened by the runtime.
type urlShape int

const (
	urlAny  urlShape = iota // the driver parses the rest (postgres, mysql: host may default)
	urlHost                 // a host: http, nats, clickhouse, mongodb, gs (the bucket)
	urlPath                 // a path after the scheme: sqlite, file
)

var schemeShapes = map[string]urlShape{
	"sqlite": urlPath, "file": urlPath,
	"http": urlHost, "https": urlHost, "nats": urlHost, "clickhouse": urlHost, "tcp": urlHost,
	"mongodb": urlHost, "mongodb+srv": urlHost, "gs": urlHost, "kafka": urlAny,
}

// checkURL checks a url against its kind's declared schemes and the shape
// its scheme needs. A template is checked as far as its leading literal
// text goes: `${env("DB_URL")}` is only known at run time.
func (rc *routeCtx) checkURL(k *stdlib.Kind, ai *attrInfo) {
	if len(k.Schemes) == 0 {
		return
	}
	text, whole := ai.val.Str, true
	if ai.val.Type == plan.TTemplate {
		whole = false
		text = ""
		if len(ai.val.Template) > 0 {
			text = ai.val.Template[0].Lit
		}
		if !strings.Contains(text, "://") {
			return // the scheme comes from a placeholder
		}
	} else if ai.val.Type != plan.TString {
		return
	}
	var want []string
	for _, s := range k.Schemes {
		if s != "" {
			want = append(want, s+"://")
		}
	}
	takes := joinOr(want)
	if slices.Contains(k.Schemes, "") {
		takes = "host:port[,host:port] or " + takes
	}
	bad := func(summary, detail string) {
		rc.c.add("E025", rc.valueRange(ai), fmt.Sprintf("%s.url%s: %s", k.Name, rc.where(), summary), detail)
	}
	scheme, rest, found := strings.Cut(text, "://")
	if !found {
		if slices.Contains(k.Schemes, "") {
			if whole {
				rc.checkBrokers(k, ai, text)
			}
			return
		}
		detail := fmt.Sprintf("A %s url is %s.", k.Name, takes)
		for _, s := range k.Schemes {
			if r, ok := strings.CutPrefix(text, s+":"); ok && s != "" {
				detail = fmt.Sprintf("Write %s://%s.", s, strings.TrimLeft(r, "/"))
				break
			}
			if r, ok := strings.CutPrefix(text, s+"//"); ok && s != "" {
				detail = fmt.Sprintf("Write %s://%s.", s, r)
				break
			}
		}
		bad(fmt.Sprintf("%q is not a URL: it has no scheme:// (it takes %s)", plan.RedactURLs(text), takes), detail)
		return
	}
	scheme = strings.ToLower(scheme)
	if !slices.Contains(k.Schemes, scheme) {
		bad(fmt.Sprintf("scheme %s:// is not one %s runs; it takes %s", scheme, k.Name, takes), didYouMean(scheme, k.Schemes))
		return
	}
	if !whole {
		// A literal prefix that goes past the host still tells whether
		// there is one: "http:///x/${payload.id}" has none.
		if h, _, ok := strings.Cut(rest, "/"); ok && h == "" && schemeShapes[scheme] == urlHost {
			bad(fmt.Sprintf("%s:// names no %s", scheme, hostWord(scheme)), fmt.Sprintf("Write %s://%s/….", scheme, strings.ToUpper(hostWord(scheme))))
		}
		return
	}
	switch schemeShapes[scheme] {
	case urlPath:
		path, _, _ := strings.Cut(rest, "?")
		if path == "" {
			bad(fmt.Sprintf("%s:// names no path", scheme), fmt.Sprintf("Write %s://PATH, relative to the .mqb file or absolute (%s:///abs/path).", scheme, scheme))
		}
	case urlHost:
		u, err := url.Parse(text)
		if err != nil {
			bad(fmt.Sprintf("%q is not a URL", plan.RedactURLs(text)), urlErrDetail(err))
		} else if u.Host == "" {
			bad(fmt.Sprintf("%s:// names no %s", scheme, hostWord(scheme)), fmt.Sprintf("Write %s://%s/….", scheme, strings.ToUpper(hostWord(scheme))))
		}
	default:
		if scheme == "kafka" {
			rc.checkBrokers(k, ai, rest)
			return
		}
		if _, err := url.Parse(text); err != nil {
			bad(fmt.Sprintf("%q is not a URL", plan.RedactURLs(text)), urlErrDetail(err))
		}
	}
}

func hostWord(scheme string) string {
	if scheme == "gs" {
		return "bucket"
	}
	return "host"
}

// joinOr joins names as alternatives: "a, b or c".
func joinOr(names []string) string {
	if len(names) < 2 {
		return joinNames(names)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// checkBrokers checks a Kafka broker list as the runtime reads it: host:port
// entries separated by commas.
func (rc *routeCtx) checkBrokers(k *stdlib.Kind, ai *attrInfo, list string) {
	n := 0
	for _, b := range strings.Split(list, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		n++
		if strings.Contains(b, "@") {
			return // the runtime explains credentials in the list itself
		}
		if _, _, err := net.SplitHostPort(b); err != nil {
			rc.c.add("E025", rc.valueRange(ai), fmt.Sprintf("%s.url%s: broker %q is not host:port", k.Name, rc.where(), b), "Write host:port[,host:port], e.g. 127.0.0.1:9092.")
			return
		}
	}
	if n == 0 {
		rc.c.add("E025", rc.valueRange(ai), fmt.Sprintf("%s.url%s names no broker", k.Name, rc.where()), "Write host:port[,host:port], e.g. 127.0.0.1:9092.")
	}
}

// urlErrDetail is url.Parse's reason without the url (it may hold a password).
func urlErrDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return "The url does not parse: " + err.Error() + "."
}
