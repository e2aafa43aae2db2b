package runtime_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseStepRoute: a text log through parse (regex), keyed on a parsed
// field into SQLite, is effectively-once; a line that does not match goes
// to the DLQ with the reason. The same input through parse logfmt, csv and
// json lands the same rows.
func TestParseStepRoute(t *testing.T) {
	for _, tc := range []struct {
		format, parse string
		lines         []string
	}{
		{"regex", `parse { format = regex, pattern = "^(?P<level>[A-Z]+) req=(?P<id>\\S+) (?P<msg>.*)$" }`,
			[]string{"INFO req=a1 started", "WARN req=b2 slow: 3s", "garbage line", "INFO req=a1 started"}},
		{"logfmt", `parse { format = logfmt }`,
			[]string{`level=INFO id=a1 msg=started`, `level=WARN id=b2 msg="slow: 3s"`, `msg="open`, `level=INFO id=a1 msg=started`}},
		{"csv", `parse { format = csv, columns = ["level", "id", "msg"] }`,
			[]string{`INFO,a1,started`, `WARN,b2,"slow: 3s"`, `only,two`, `INFO,a1,started`}},
		{"json", `parse { format = json }`,
			[]string{`{"level":"INFO","id":"a1","msg":"started"}`, `{"level":"WARN","id":"b2","msg":"slow: 3s"}`, `{"level":`, `{"level":"INFO","id":"a1","msg":"started"}`}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			dir := t.TempDir()
			writeLines(t, filepath.Join(dir, "app.log"), tc.lines...)
			p := compileMQB(t, `
route logs {
  guarantee effectively_once
  from file { path = "app.log", format = text }
  `+tc.parse+`
  id payload.id
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS events (id TEXT PRIMARY KEY, level TEXT, msg TEXT)"
    insert_query = "INSERT INTO events (id, level, msg) VALUES (${meta[\"mqb.id\"]}, ${payload.level}, ${payload.msg}) ON CONFLICT (id) DO NOTHING"
  }
}`)
			st := runIn(t, dir, p).Route("logs")
			if st.In != 4 || st.Out != 3 || st.DeadLettered != 1 {
				t.Fatalf("stats %+v", st)
			}
			rows := sqliteMap[string](t, filepath.Join(dir, "out.db"), "SELECT id, level || '|' || msg FROM events")
			if fmt.Sprint(rows) != "map[a1:INFO|started b2:WARN|slow: 3s]" {
				t.Errorf("rows %v", rows)
			}
			dl := readDLQLines(t, filepath.Join(dir, "dlq.jsonl"))
			if len(dl) != 1 || !strings.HasPrefix(dl[0].Error, "parse "+tc.format+": ") {
				t.Errorf("DLQ %+v", dl)
			}
		})
	}
}
