package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// The ClickHouse sink's premises. ClickHouse has no unique constraint: a
// replayed row is absorbed only by a ReplacingMergeTree, which collapses
// rows with one sorting key — within one partition. So the premise holds
// when the engine is a ReplacingMergeTree (Replicated… too), its sorting
// key is not empty (that would collapse every row into one) and reads only
// columns bound to stable values, and so does its partition key.
//
// PremiseNoTriggers holds when no materialized view reads the table: a
// view runs on every block inserted, a replay's too, and writes into a
// table of its own that a ReplacingMergeTree's merge never reaches.

func (s *clickhouseSink) PremiseNode() string { return s.node }

// chKeys is what system.tables and system.columns say about a table's keys.
type chKeys struct {
	engine, sortingKey, partitionKey string
	sortingCols, partitionCols       []string
}

func (s *clickhouseSink) readKeys(ctx context.Context) (chKeys, error) {
	var k chKeys
	if err := s.conn.QueryRow(ctx, `SELECT engine, sorting_key, partition_key FROM system.tables WHERE database = ? AND name = ?`,
		s.db, s.table).Scan(&k.engine, &k.sortingKey, &k.partitionKey); err != nil {
		return k, err
	}
	rows, err := s.conn.Query(ctx, `SELECT name, is_in_sorting_key, is_in_partition_key FROM system.columns WHERE database = ? AND table = ? ORDER BY position`, s.db, s.table)
	if err != nil {
		// Servers without position (older than 19.x) order by name.
		rows, err = s.conn.Query(ctx, `SELECT name, is_in_sorting_key, is_in_partition_key FROM system.columns WHERE database = ? AND table = ?`, s.db, s.table)
	}
	if err != nil {
		return k, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var inSort, inPart uint8
		if err := rows.Scan(&name, &inSort, &inPart); err != nil {
			return k, err
		}
		if inSort == 1 {
			k.sortingCols = append(k.sortingCols, name)
		}
		if inPart == 1 {
			k.partitionCols = append(k.partitionCols, name)
		}
	}
	return k, rows.Err()
}

func (s *clickhouseSink) CheckPremise(ctx context.Context, p plan.Premise) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch p.Kind {
	case plan.PremiseReplacingMergeTree:
	case plan.PremiseNoTriggers:
		return s.checkNoViews(ctx)
	default:
		return fmt.Errorf("the clickhouse sink cannot check a %s premise", p.Kind)
	}
	k, err := s.readKeys(ctx)
	if err != nil {
		return fmt.Errorf("read the engine and keys of %s.%s: %s", s.db, s.table, plan.RedactURLs(err.Error()))
	}
	cols := p.Columns
	if len(cols) == 0 {
		// No columns block: the sink writes the payload's top-level
		// fields, which the proof found stable. A column the server fills
		// (DEFAULT now(), MATERIALIZED) is not among them.
		for _, c := range s.cols {
			if c.field != "" {
				cols = append(cols, c.name)
			}
		}
	}
	return chPremiseHolds(s.db+"."+s.table, k, cols)
}

// chPremiseHolds decides the ReplacingMergeTree premise from what the
// server said; cols are the columns bound to stable values.
func chPremiseHolds(table string, k chKeys, cols []string) error {
	stable := map[string]bool{}
	for _, c := range cols {
		stable[runtime.UnquoteIdent(c)] = true
	}
	list := strings.Join(cols, ", ")
	fix := fmt.Sprintf("create the table with ENGINE = ReplacingMergeTree(version) ORDER BY (%s) (and a PARTITION BY on those columns only, or none), then move the rows over with INSERT INTO … SELECT", list)
	if !strings.HasSuffix(k.engine, "ReplacingMergeTree") {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s has engine %s, not ReplacingMergeTree: nothing collapses a replayed row, so it is stored twice", table, k.engine),
			Fix:   fix,
		}
	}
	if len(k.sortingCols) == 0 {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s has an empty sorting key (ORDER BY %q): a ReplacingMergeTree would collapse every row into one", table, k.sortingKey),
			Fix:   fix,
		}
	}
	var off []string
	for _, c := range k.sortingCols {
		if !stable[c] {
			off = append(off, c)
		}
	}
	if len(off) > 0 {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s is sorted by (%s), which reads %s, not among the columns bound to stable values (%s): a replayed row gets another sorting key and is never collapsed", table, k.sortingKey, strings.Join(off, ", "), list),
			Fix:   fix,
		}
	}
	for _, c := range k.partitionCols {
		if !stable[c] {
			off = append(off, c)
		}
	}
	if len(off) > 0 {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s is partitioned by %s, which reads %s, not among the columns bound to stable values (%s): a replayed row can land in another partition, and rows are only collapsed within one", table, k.partitionKey, strings.Join(off, ", "), list),
			Fix:   fix,
		}
	}
	return nil
}

// ArmPremise arms PremiseKeyPresent: a record that leaves one of the
// premise's columns without a value fails, even when the column is
// Nullable.
func (s *clickhouseSink) ArmPremise(p plan.Premise) error {
	if p.Kind != plan.PremiseKeyPresent {
		return fmt.Errorf("the clickhouse sink cannot check a per-record %s premise", p.Kind)
	}
	for _, c := range p.Columns {
		name := runtime.UnquoteIdent(c)
		found := false
		for i := range s.cols {
			if s.cols[i].name == name {
				s.cols[i].key = true
				found = true
			}
		}
		if !found {
			return fmt.Errorf("key column %s is not written by the sink", c)
		}
	}
	return nil
}

// checkNoViews checks PremiseNoTriggers: system.tables lists, for each
// table, the materialized views that read it (dependencies_database,
// dependencies_table).
func (s *clickhouseSink) checkNoViews(ctx context.Context) error {
	var dbs, views []string
	if err := s.conn.QueryRow(ctx, `SELECT dependencies_database, dependencies_table FROM system.tables WHERE database = ? AND name = ?`,
		s.db, s.table).Scan(&dbs, &views); err != nil {
		return fmt.Errorf("read the views of %s.%s: %s", s.db, s.table, plan.RedactURLs(err.Error()))
	}
	if len(views) == 0 {
		return nil
	}
	names := make([]string, len(views))
	drops := make([]string, len(views))
	for i, v := range views {
		names[i] = v
		if i < len(dbs) {
			names[i] = dbs[i] + "." + v
		}
		drops[i] = "DROP TABLE " + names[i]
	}
	return &runtime.PremiseFailure{
		Found: fmt.Sprintf("table %s.%s is read by %d materialized view(s): %s — each block inserted into it, a replay's after a crash too, goes through the view into the view's own table, which keeps the repeat (a ReplacingMergeTree collapses it only in %s)",
			s.db, s.table, len(views), strings.Join(names, ", "), s.table),
		Fix: "read the table itself (with FINAL) where the view's results are needed, or feed the view's table from a route of its own, and drop the view: " + strings.Join(drops, "; "),
	}
}
