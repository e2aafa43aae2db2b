package main

import (
	"bytes"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	_ "github.com/mattn/go-sqlite3"
)

// Multiset counts records by their canonical text.
type Multiset map[string]int

// Snapshot is what a run left in a route's sinks, one multiset per
// comparison group, in two projections: Full (every column, volatile ones
// as "*") and Kept (without the columns a DO UPDATE rewrites, for the
// at-least-once loss check).
type Snapshot struct {
	Full, Kept map[string]Multiset
	// AnyBranch are the groups the loss check skips (Artifact.AnyBranch).
	AnyBranch map[string]bool
	// DLQ holds, per dead-letter group, what the first line of each of
	// its records (by the key Full counts it under) says: why the record
	// is there, and its payload (explainDLQ reads them).
	DLQ map[string]map[string]DLQEntry
}

// DLQEntry is what a dead-letter line says of its record.
type DLQEntry struct {
	Error   string
	Payload json.RawMessage
}

func newSnapshot() Snapshot {
	return Snapshot{Full: map[string]Multiset{}, Kept: map[string]Multiset{}, AnyBranch: map[string]bool{},
		DLQ: map[string]map[string]DLQEntry{}}
}

// addDLQ notes what the first dead-letter line counted under key says.
func (s Snapshot) addDLQ(group, key string, e DLQEntry) {
	if s.DLQ[group] == nil {
		s.DLQ[group] = map[string]DLQEntry{}
	}
	if _, ok := s.DLQ[group][key]; !ok {
		s.DLQ[group][key] = e
	}
}

func (s Snapshot) add(group, full, kept string) {
	if s.Full[group] == nil {
		s.Full[group], s.Kept[group] = Multiset{}, Multiset{}
	}
	s.Full[group][full]++
	s.Kept[group][kept]++
}

// snapshot reads back every artifact of route under dir.
func snapshot(dir string, route RouteShape) (Snapshot, error) {
	s := newSnapshot()
	for _, a := range route.Artifacts {
		// An empty group still counts: "nothing landed" is a result.
		if s.Full[a.Group] == nil {
			s.Full[a.Group], s.Kept[a.Group] = Multiset{}, Multiset{}
		}
		if a.AnyBranch {
			s.AnyBranch[a.Group] = true
		}
		var err error
		switch a.Kind {
		case "table":
			err = readTable(s, dir, a)
		case "parts":
			err = readTree(s, filepath.Join(dir, a.Path), a)
		case "lines":
			err = readLines(s, filepath.Join(dir, a.Path), a)
		case "dlq":
			err = readDLQ(s, filepath.Join(dir, a.Path), a)
		case "mongo":
			err = readMongo(s, dir, a)
		default:
			err = fmt.Errorf("unknown artifact kind %q", a.Kind)
		}
		if err != nil {
			return s, fmt.Errorf("read %s %s%s: %w", a.Kind, a.Path, ifTable(a), err)
		}
	}
	return s, nil
}

func ifTable(a Artifact) string {
	if a.Table != "" {
		return ":" + a.Table
	}
	return ""
}

func readTable(s Snapshot, dir string, a Artifact) error {
	h, query, ok, err := openTable(dir, a)
	if err != nil || !ok {
		return err
	}
	defer h.Close()
	rows, err := h.Query(query)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if a.KeyOnly != "" {
			// Only the key, and no row without one (see Artifact.KeyOnly).
			i := slices.Index(cols, a.KeyOnly)
			if i < 0 {
				return fmt.Errorf("no column %s", a.KeyOnly)
			}
			if vals[i] != nil {
				k := a.KeyOnly + "=" + sqlText(vals[i])
				s.add(a.Group, k, k)
			}
			continue
		}
		var full, kept []string
		for i, c := range cols {
			v := "*"
			if !slices.Contains(a.Volatile, c) {
				v = sqlText(vals[i])
			}
			mutable := slices.Contains(a.Mutable, c)
			if !mutable || !a.FirstWins {
				full = append(full, c+"="+v)
			}
			if !mutable {
				kept = append(kept, c+"="+v)
			}
		}
		s.add(a.Group, strings.Join(full, " "), strings.Join(kept, " "))
	}
	return rows.Err()
}

// openTable opens the database of a table artifact and says how to read
// the table; ok is false when there is no such table (nothing written).
func openTable(dir string, a Artifact) (h *sql.DB, query string, ok bool, err error) {
	if isServerPlaceholder(a.Path) {
		return openServerTable(dir, a)
	}
	path := filepath.Join(dir, a.Path)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, "", false, nil
	}
	// Read-only, without creating anything; the WAL, if any, is read too.
	h, err = sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return nil, "", false, err
	}
	var n int
	if err := h.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, a.Table).Scan(&n); err != nil || n == 0 {
		h.Close()
		return nil, "", false, err
	}
	return h, `SELECT * FROM "` + a.Table + `"`, true, nil
}

// sqlText renders a column value with its type, so 1 and '1' differ.
func sqlText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64) + "f"
	case string:
		return strconv.Quote(x)
	case []byte:
		return "x'" + hex.EncodeToString(x) + "'"
	default:
		return fmt.Sprintf("%v", x)
	}
}

// readTree reads every committed part file under root (temporary files
// start with a dot); a part file's name depends on batch boundaries, so
// only its lines count.
func readTree(s Snapshot, root string, a Artifact) error {
	return filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.IsDir() || strings.HasPrefix(fi.Name(), ".") {
			return nil
		}
		return readLines(s, path, a)
	})
}

func readLines(s Snapshot, path string, a Artifact) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		l := canonicalLine(line, a.Volatile)
		s.add(a.Group, l, l)
	}
	return nil
}

// canonicalLine re-encodes a JSON object line with its keys sorted, every
// digit of its numbers kept and volatile fields as "*"; other lines stay
// as they are.
func canonicalLine(line []byte, volatile []string) string {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || d.More() {
		return string(line)
	}
	for _, f := range volatile {
		if _, ok := m[f]; ok {
			m[f] = "*"
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return string(line)
	}
	return string(out)
}

const unparsable = " (unparsable)"

// readDLQ counts the record positions of a dead-letter file.
func readDLQ(s Snapshot, path string, a Artifact) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var rec struct {
			Error    string          `json:"error"`
			Position json.RawMessage `json:"position"`
			Raw      *string         `json:"raw"`
			Payload  json.RawMessage `json:"payload"`
		}
		p, kept := "?", ""
		if json.Unmarshal(line, &rec) == nil && rec.Position != nil {
			p = "position " + string(rec.Position)
			if a.ByContent {
				switch {
				case rec.Raw != nil:
					p = "record " + strconv.Quote(*rec.Raw)
				case rec.Payload != nil:
					p = "record " + canonicalLine(rec.Payload, a.Volatile)
				}
			}
			kept = p
			if rec.Raw != nil {
				// A line that is not a record fails the same way on every
				// run, whatever the route does with the others.
				kept += unparsable
			} else if rec.Payload != nil {
				s.addDLQ(a.Group, p, DLQEntry{Error: rec.Error, Payload: rec.Payload})
			}
		} else {
			p = "unreadable DLQ line: " + string(line)
			kept = p
		}
		s.add(a.Group, p, kept)
	}
	return nil
}
