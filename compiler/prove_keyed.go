package compiler

import (
	"fmt"
	"strings"

	"github.com/mqb-dev/mqb/plan"
)

// The proofs of key-addressed sinks: SQL, MongoDB, ClickHouse.

func (rc *routeCtx) proveSQL(n *nodeInfo) sinkProof {
	iq := n.attrs["insert_query"]
	table := ""
	if t := n.attrs["table"]; t != nil {
		table = t.val.Str
	}
	reportOutcome := boolAttr(n, "report_outcome")
	var p sinkProof
	defer func() {
		if reportOutcome && !p.ok && !rc.inNamedUnused {
			rc.c.add("E043", n.attrs["report_outcome"].rng, fmt.Sprintf("sql report_outcome in route %s has no deterministic key", rc.name),
				"Without conflict columns bound to stable values there is no duplicate to detect, so the outcome would always be `inserted`.")
		}
	}()
	if iq == nil {
		if table == "" {
			if n.role != plan.RoleSource {
				rc.c.add("E016", n.rng, "sql sink needs insert_query (or table)", "insert_query is an INSERT with every ${…} bound as a parameter.")
			}
			p.missing = "the sql sink has no insert_query"
			return p
		}
		p.reasons = []string{fmt.Sprintf("write: plain INSERT of the payload's fields into %s", table)}
		p.missing = fmt.Sprintf("sink write is not idempotent: plain INSERT into %s; set insert_query with ON CONFLICT (id) DO NOTHING", table)
		return p
	}
	parts := iq.parts
	if parts == nil {
		parts = []partInfo{{lit: iq.val.Str, stab: stableValue}}
	}
	ins, ok := parseInsert(skeleton(parts))
	if !ok {
		p.reasons = []string{"write: insert_query is not an INSERT … (columns) VALUES (…) statement mqb can analyse"}
		p.missing = "sink write is not proven idempotent: insert_query is not an INSERT … (columns) VALUES (…) with a conflict clause"
		return p
	}
	if ins.kind != conflictNone && boolAttr(n, "bulk_copy") && !rc.inNamedUnused {
		rc.c.add("E042", n.attrs["bulk_copy"].rng, fmt.Sprintf("sql bulk_copy in route %s cannot honour %s", rc.name, ins.clause),
			"COPY cannot express a conflict clause; pick bulk speed (drop the clause) or deduplication (drop bulk_copy).")
	}
	switch ins.kind {
	case conflictNone:
		first := "id"
		if len(ins.columns) > 0 {
			first = ins.columns[0]
		}
		if !rc.inNamedUnused && !rc.outbox {
			rc.warn("W006", iq.rng, fmt.Sprintf("insert_query into %s in route %s is a plain INSERT without a conflict clause", ins.table, rc.name),
				fmt.Sprintf("A replay fails the row as a non-retryable constraint error (to the DLQ) or inserts it twice. Add ON CONFLICT (%s) DO NOTHING, or ON DUPLICATE KEY UPDATE on MySQL.", first))
		}
		p.reasons = []string{fmt.Sprintf("write: plain INSERT into %s", ins.table)}
		p.missing = fmt.Sprintf("sink write is not idempotent: plain INSERT; add ON CONFLICT (%s) DO NOTHING", first)
	case conflictColumns:
		p.ok = true
		var keys []string
		for _, col := range ins.targets {
			i := indexOf(ins.columns, col)
			if i < 0 {
				p.ok = false
				p.missing = fmt.Sprintf("sink write is not proven idempotent: conflict column %s of %s is not in the insert's column list", col, ins.clause)
				break
			}
			st := valueStability(ins.values[i], parts)
			shown := showValue(ins.values[i], parts)
			if !st.Stable {
				p.ok = false
				p.missing = fmt.Sprintf("sink write is not idempotent: %s targets column %s, bound to %s, which is per-delivery (%s)", ins.clause, col, shown, st.Why)
				p.reasons = []string{fmt.Sprintf("write: %s, but its key %s = %s is per-delivery (%s)", ins.clause, col, shown, st.Why)}
				break
			}
			keys = append(keys, fmt.Sprintf("%s = %s (stable)", col, shown))
		}
		if p.ok {
			p.reasons = []string{"write: " + ins.clause, "key: " + strings.Join(keys, ", ")}
		} else if p.reasons == nil {
			p.reasons = []string{"write: " + ins.clause + ", but its conflict target is not in the column list"}
		}
	case conflictAnyKey:
		p.ok = true
		for i, v := range ins.values {
			if st := valueStability(v, parts); !st.Stable {
				p.ok = false
				p.missing = fmt.Sprintf("sink write is not idempotent: %s names no columns, so every bound value must be stable, but %s = %s is per-delivery (%s)", ins.clause, ins.columns[i], showValue(v, parts), st.Why)
				break
			}
		}
		if p.ok {
			p.reasons = []string{"write: " + ins.clause, "key: every bound value is stable"}
		} else {
			p.reasons = []string{"write: " + ins.clause + ", but a bound value is per-delivery"}
		}
	}
	return p
}

func (rc *routeCtx) proveMongo(n *nodeInfo) sinkProof {
	var p sinkProof
	idf := n.attrs["id_field"]
	switch {
	case idf == nil:
		p.reasons = []string{"write: mongodb without id_field gives every insert a fresh _id"}
		p.missing = "sink write is not idempotent: mongodb without id_field gives every insert a fresh _id; set id_field = \"order_id\""
	case idf.val.Type == plan.TTemplate:
		shown := templateText(idf.val.Template)
		if idf.stab.Stable {
			p.ok = true
			p.reasons = []string{fmt.Sprintf("write: mongodb id_field %s becomes _id (stable); a repeat hits the unique _id index", shown)}
		} else {
			p.reasons = []string{fmt.Sprintf("write: mongodb id_field %s is per-delivery: %s", shown, idf.stab.Why)}
			p.missing = fmt.Sprintf("mongodb id_field %s is per-delivery: %s", shown, idf.stab.Why)
		}
	default:
		field := idf.val.Str
		st := stableValue
		if t, ok := rc.taint[field]; ok {
			st = t
		}
		if st.Stable {
			p.ok = true
			p.reasons = []string{fmt.Sprintf("write: mongodb id_field %s, _id = payload.%s (stable); a repeat hits the unique _id index", field, field)}
		} else {
			p.reasons = []string{fmt.Sprintf("write: mongodb id_field %s is per-delivery: %s", field, st.Why)}
			p.missing = fmt.Sprintf("mongodb id_field %s is per-delivery: %s", field, st.Why)
		}
	}
	if !rc.inNamedUnused && boolAttr(n, "report_outcome") {
		if !p.ok {
			rc.c.add("E043", n.attrs["report_outcome"].rng, fmt.Sprintf("mongodb report_outcome in route %s has no deterministic key", rc.name),
				"Set id_field to a stable field: without a deterministic _id there is no duplicate to detect, so the outcome would always be `inserted`.")
		}
		if boolAttr(n, "request_reply") {
			rc.c.add("E044", n.attrs["request_reply"].rng, fmt.Sprintf("mongodb in route %s sets both report_outcome and request_reply", rc.name),
				"request_reply switches the publisher to the reply-polling path, which never reports an outcome: drop request_reply.")
		}
	}
	return p
}

func (rc *routeCtx) proveClickHouse(n *nodeInfo) sinkProof {
	table := ""
	if t := n.attrs["table"]; t != nil {
		table = t.val.Str
	}
	return sinkProof{ok: true, reasons: []string{fmt.Sprintf(
		"write: clickhouse table %s, effectively-once pending run-time verification: ReplacingMergeTree verified against the server at run start-up", table)}}
}
