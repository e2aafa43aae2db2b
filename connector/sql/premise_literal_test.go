package sql

import "testing"

// TestSQLLiteralDefault: which catalogue DEFAULTs are literals.
func TestSQLLiteralDefault(t *testing.T) {
	for d, want := range map[string]bool{
		"NULL": true, "-1": true, "1.5e3": true, "'new'": true, "('new')": true, "'it''s'": true, "X'00ff'": true, "TRUE": true, "0x1F": true,
		"CURRENT_TIMESTAMP": false, "current_timestamp()": false, "(datetime('now'))": false, "uuid()": false, "random()": false, "'a' || 'b'": false, "1 + 1": false,
	} {
		if got := sqlLiteralDefault(d); got != want {
			t.Errorf("sqlLiteralDefault(%q) = %v, want %v", d, got, want)
		}
	}
}
