package runtime

import (
	"encoding/csv"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// parseStep is `parse { format, pattern, columns }`: it turns a text
// payload into a JSON object that replaces it. A record whose payload is
// not text, or does not parse, is dead-lettered with the reason.
type parseStep struct {
	format  string
	re      *regexp.Regexp
	names   []string // re's group names, "" for unnamed
	columns []string
	whole   *program // `payload`: makes the route hand the step the whole payload
}

type parseConfig struct {
	Format  string   `attr:"format"`
	Pattern string   `attr:"pattern"`
	Columns []string `attr:"columns"`
}

func newParseStep(a nodeAttrs, c *compiler) (*parseStep, error) {
	var cfg parseConfig
	if err := decodeConfig(a, &cfg); err != nil {
		return nil, err
	}
	s := &parseStep{format: cfg.Format, columns: cfg.Columns}
	switch cfg.Format {
	case "regex":
		re, err := regexp.Compile(cfg.Pattern)
		if err != nil {
			return nil, a.errorf("pattern", "%v", err)
		}
		s.re, s.names = re, re.SubexpNames()
	case "csv":
		if len(cfg.Columns) == 0 {
			return nil, a.errorf("columns", "required with format = csv")
		}
	}
	whole, err := c.compile("payload")
	if err != nil {
		return nil, err
	}
	s.whole = whole
	return s, nil
}

func (s *parseStep) programs() []*program { return []*program{s.whole} }

func (s *parseStep) apply(w *worker, b *batch) error {
	applyEach(s, w, b)
	return nil
}

func (s *parseStep) applyRecord(w *worker, r *Record) {
	text, ok := r.payload().(string)
	if !ok {
		r.kill(fmt.Sprintf("parse %s: the payload is %s, not text (parse reads a format = text line, or a JSON string)", s.format, jsonKind(r.payload())))
		return
	}
	var v any
	var err error
	switch s.format {
	case "json":
		v, err = w.dec.Decode([]byte(text))
	case "logfmt":
		v, err = parseLogfmt(text)
	case "regex":
		v, err = s.parseRegex(text)
	case "csv":
		v, err = s.parseCSV(text)
	default:
		err = fmt.Errorf("unknown format")
	}
	if err != nil {
		r.kill(fmt.Sprintf("parse %s: %v", s.format, err))
		return
	}
	r.setValue(v)
	r.dirty = true
}

func (s *parseStep) parseRegex(text string) (any, error) {
	m := s.re.FindStringSubmatch(text)
	if m == nil {
		return nil, fmt.Errorf("the line does not match %s", s.re)
	}
	obj := map[string]any{}
	for i, name := range s.names {
		if name != "" && i < len(m) {
			obj[name] = m[i]
		}
	}
	return obj, nil
}

func (s *parseStep) parseCSV(text string) (any, error) {
	cr := csv.NewReader(strings.NewReader(text))
	cr.FieldsPerRecord = -1
	fields, err := cr.Read()
	if err != nil {
		return nil, err
	}
	if len(fields) != len(s.columns) {
		return nil, fmt.Errorf("%d fields for %d columns", len(fields), len(s.columns))
	}
	obj := make(map[string]any, len(fields))
	for i, c := range s.columns {
		obj[c] = fields[i]
	}
	return obj, nil
}

// parseLogfmt reads key=value pairs separated by spaces: a value is bare
// (up to the next space) or double-quoted with Go escapes; a key alone is
// true. A later repeat of a key wins.
func parseLogfmt(text string) (map[string]any, error) {
	obj := map[string]any{}
	i := 0
	for {
		for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
			i++
		}
		if i >= len(text) {
			return obj, nil
		}
		start := i
		for i < len(text) && text[i] != '=' && text[i] != ' ' && text[i] != '\t' {
			if text[i] == '"' {
				return nil, fmt.Errorf("a key cannot hold a quote (at byte %d)", i)
			}
			i++
		}
		key := text[start:i]
		if key == "" {
			return nil, fmt.Errorf("a pair has no key (at byte %d)", start)
		}
		if i >= len(text) || text[i] != '=' {
			obj[key] = true
			continue
		}
		i++ // '='
		if i < len(text) && text[i] == '"' {
			end := i + 1
			for end < len(text) && text[end] != '"' {
				if text[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(text) {
				return nil, fmt.Errorf("the value of %s has no closing quote", key)
			}
			v, err := strconv.Unquote(text[i : end+1])
			if err != nil {
				return nil, fmt.Errorf("the value of %s: %v", key, err)
			}
			obj[key] = v
			i = end + 1
			continue
		}
		start = i
		for i < len(text) && text[i] != ' ' && text[i] != '\t' {
			i++
		}
		obj[key] = text[start:i]
	}
}

// jsonKind names the JSON type of a decoded value, for reasons.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	}
	return "a number"
}
