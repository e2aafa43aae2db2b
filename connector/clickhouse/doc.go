// Package clickhouse is the clickhouse sink: each write one
// native-protocol batch insert with an explicit column list, a repeat
// absorbed only by a ReplacingMergeTree table (see clickhouseSink), and
// the table-engine premise the compiler's proof may rest on, read from
// system.tables.
//
// It registers the "clickhouse" kind with the runtime in init; a binary
// that runs plans links it with a blank import, as connector/all does.
// The package is named after the kind, so it imports the ClickHouse
// driver as chgo.
package clickhouse
