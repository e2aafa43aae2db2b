package sql

import (
	"log/slog"
	"sync"

	"github.com/mqb-dev/mqb/runtime"
)

// absentWarner says, once per placeholder, that a ${payload.x} bound NULL
// because the record has no field x at all — usually a misspelt field
// (${payload.totl}), which would otherwise fill a column with NULLs in
// silence. A field present with the value null is the data's own NULL and
// is not warned about. A NULL bound into a conflict column is not a
// warning but a per-record failure (bindParams).
type absentWarner struct {
	log    *slog.Logger
	warned sync.Map // *runtime.Program → true
}

// check warns when p is a payload field path r's payload lacks.
func (w *absentWarner) check(p *runtime.Program, r *runtime.Record) {
	if w == nil || w.log == nil || p.PayloadPath() == nil {
		return
	}
	if _, isObject := r.Value().(map[string]any); !isObject || payloadHas(r.Value(), p.PayloadPath()) {
		return
	}
	if _, done := w.warned.LoadOrStore(p, true); done {
		return
	}
	w.log.Warn("a placeholder names a field the record does not have: NULL is written for it (is the field misspelt?); warned once per placeholder",
		"placeholder", "${"+p.Expr()+"}", "partition", r.Partition, "position", r.Seq)
}

// payloadHas reports whether the field path exists in v (with any value,
// null included).
func payloadHas(v any, path []string) bool {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[k]; !ok {
			return false
		}
	}
	return true
}

// warnAbsent makes the sink warn about placeholders naming fields records
// lack, through log.
func (s *sqlSink) warnAbsent(log *slog.Logger) {
	s.absent = &absentWarner{log: log}
	if s.server != nil {
		s.server.absent = s.absent
	}
}
