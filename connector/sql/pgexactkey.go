package sql

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Exact keys: a split write may run part 1 after the COPY of part 2 (and
// beside it, pgaside.go) only where no key of part 1 is one of part 2,
// and the sink tells keys apart by their texts. So only where two texts
// of a key column are one value exactly when they are the same text: an
// allow-list of column types, each with the form its texts must take.
//   - text, or varchar without a length (which would cut trailing
//     blanks), under a deterministic collation: any text;
//   - smallint, integer, bigint: the digits with an optional minus, no
//     leading zero, no sign on zero (5, not 05, +5 or 5.0);
//   - uuid: lower-case hex in the 8-4-4-4-12 groups.
// And in every unique or exclusion index over the column, the type's
// default operator class under a deterministic collation. A write whose
// key text is not in its column's form (a JSON string "05" bound to a
// bigint) stops a streamed COPY, and part 1 goes before COPY instead,
// as it does on any other column type.

// keyForm is the form a key column's texts must take to be told apart by
// their bytes.
type keyForm uint8

const (
	formText keyForm = iota // any text
	formInt                 // canonical decimal integer
	formUUID                // canonical lower-case uuid
)

// errInexactKey stops a streamed split write's COPY at a key not in its
// form.
var errInexactKey = errors.New("a key not in its column's form")

// exactKeyPG reads, for each column named in $2 (in order) of the table
// named $1, its form ('text', 'int', 'uuid', NULL for none) and whether
// every unique or exclusion index over it uses the default operator
// class under a deterministic collation.
const exactKeyPG = `SELECT CASE
    WHEN a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN 'int'
    WHEN a.atttypid = 'uuid'::regtype THEN 'uuid'
    WHEN (a.atttypid = 'text'::regtype OR (a.atttypid = 'varchar'::regtype AND a.atttypmod = -1))
      AND coalesce((SELECT l.collisdeterministic FROM pg_collation l WHERE l.oid = a.attcollation), false) THEN 'text'
  END,
  a.attnum IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_index i,
      unnest(i.indkey::int2[], i.indcollation::oid[], i.indclass::oid[]) AS x(attnum, coll, opc)
    WHERE i.indrelid = a.attrelid AND (i.indisunique OR i.indisexclusion) AND x.attnum = a.attnum
      AND NOT ((x.coll = 0 OR coalesce((SELECT l.collisdeterministic FROM pg_collation l WHERE l.oid = x.coll), false))
        AND coalesce((SELECT o.opcdefault FROM pg_opclass o WHERE o.oid = x.opc), false)))
FROM unnest($2::text[]) WITH ORDINALITY AS n(name, ord)
LEFT JOIN pg_attribute a ON a.attrelid = to_regclass($1) AND a.attname = n.name AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY n.ord`

// exactKeyReady reads exactKeyPG for sp's key columns: their forms, and
// false when one has none, or it cannot tell.
func exactKeyReady(ctx context.Context, c *pgconn.PgConn, sp *pgSplit) ([]keyForm, bool) {
	if len(sp.keys) == 0 {
		return nil, true // no key: every row goes by COPY, none by part 1
	}
	names := []byte{'{'}
	for n, j := range sp.keys {
		if j >= len(sp.columns) {
			return nil, false
		}
		if n > 0 {
			names = append(names, ',')
		}
		names = appendArrayElem(names, []byte(foldPostgres(sp.columns[j])))
	}
	names = append(names, '}')
	res := c.ExecParams(ctx, exactKeyPG, [][]byte{[]byte(sp.table), names}, nil, nil, nil).Read()
	if res.Err != nil || len(res.Rows) != len(sp.keys) {
		return nil, false
	}
	forms := make([]keyForm, len(sp.keys))
	for n, row := range res.Rows {
		if string(row[1]) != "t" {
			return nil, false
		}
		switch string(row[0]) {
		case "text":
			forms[n] = formText
		case "int":
			forms[n] = formInt
		case "uuid":
			forms[n] = formUUID
		default:
			return nil, false
		}
	}
	return forms, true
}

// canonical reports whether every key value of row is in its column's
// form (a NULL is).
func (sp *pgSplit) canonical(row [][]byte) bool {
	for n, f := range sp.forms {
		if v := row[sp.keys[n]]; v != nil && !f.holds(v) {
			return false
		}
	}
	return true
}

// holds reports whether v is in form f.
func (f keyForm) holds(v []byte) bool {
	switch f {
	case formInt:
		if len(v) > 0 && v[0] == '-' {
			v = v[1:]
			if len(v) == 1 && v[0] == '0' {
				return false // -0
			}
		}
		if len(v) == 0 || (v[0] == '0' && len(v) > 1) {
			return false
		}
		for _, c := range v {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	case formUUID:
		if len(v) != 36 {
			return false
		}
		for i, c := range v {
			switch {
			case i == 8 || i == 13 || i == 18 || i == 23:
				if c != '-' {
					return false
				}
			case (c < '0' || c > '9') && (c < 'a' || c > 'f'):
				return false
			}
		}
		return true
	}
	return true
}
