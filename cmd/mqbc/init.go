package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func init() {
	register(&command{
		Name:    "init",
		Usage:   "mqbc init [--from KIND] [--to KIND] [-o FILE]",
		Summary: "write a commented starter .mqb for a source and a sink (stdout by default), one that builds as it is",
		Run:     runInit,
	})
}

// starterSources and starterSinks are the endpoint blocks `mqbc init`
// writes, each with the comments a first-time user needs. Every pair
// builds (TestInitBuilds).
var starterSources = map[string]string{
	"file": `  # A JSON-lines file, read from the last committed record on each run.
  from file { path = "input.jsonl" }`,
	"stdin": `  # Standard input, a line a record. A pipe cannot be read again: at-most-once.
  from stdin {}`,
	"kafka": `  # A consumer group: offsets are committed only past records delivered
  # (or dead-lettered).
  from kafka {
    url      = "127.0.0.1:9092"
    topic    = "orders"
    group_id = "mqb-orders"
  }`,
	"nats": `  # A JetStream durable consumer, acked after delivery.
  from nats {
    url     = "nats://127.0.0.1:4222"
    subject = "orders.>"
    durable = "mqb-orders"
  }`,
	"sql": `  # A table read in order of a unique, increasing integer column.
  from sql {
    url           = "postgres://mqb@127.0.0.1/shop"
    table         = "orders"
    cursor_column = "id"
  }`,
	"postgres_cdc": `  # Row changes by logical replication (wal_level = logical).
  from postgres_cdc {
    url         = "postgres://mqb@127.0.0.1/shop"
    publication = "mqb_orders"
    slot_name   = "mqb_orders"
  }`,
	"object_store": `  # Every object under the prefix, in key order.
  from object_store { url = "file://incoming" }`,
	"redis": `  # A stream read by a consumer group; an entry is acknowledged only once
  # delivered (or dead-lettered), and what was not is read again.
  from redis {
    url    = "redis://127.0.0.1:6379"
    stream = "orders"
    group  = "mqb-orders"
  }`,
}

var starterSinks = map[string]string{
	"sql": `  # ON CONFLICT on the record's identity absorbs a replay: effectively-once.
  to sql {
    url          = "sqlite://out/orders.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, body TEXT)"
    insert_query = """
      INSERT INTO orders (id, body) VALUES (${meta["mqb.id"]}, ${payload.body})
      ON CONFLICT (id) DO NOTHING
    """
  }`,
	"file": `  # Appended lines: a replay after a crash can write a line again.
  to file { path = "out/orders.jsonl" }`,
	"stdout": `  # Standard output, a line a record; mqbc run then reports on stderr.
  to stdout {}`,
	"kafka": `  # Keyed by the record's identity; a broker cannot absorb a replay.
  to kafka {
    url           = "127.0.0.1:9092"
    topic         = "orders-out"
    partition_key = "${meta[\"mqb.id\"]}"
  }`,
	"nats": `  # JetStream deduplicates a replay within its duplicate window.
  to nats {
    url     = "nats://127.0.0.1:4222"
    subject = "orders.loaded"
  }`,
	"mongodb": `  # The identity becomes _id: a replay hits the unique _id index.
  to mongodb {
    url        = "mongodb://127.0.0.1:27017"
    database   = "shop"
    collection = "orders"
    id_field   = "${meta[\"mqb.id\"]}"
  }`,
	"clickhouse": `  # ReplacingMergeTree keyed on the identity absorbs a replay.
  to clickhouse {
    url   = "clickhouse://127.0.0.1:9000/default"
    table = "orders"
  }`,
	"http": `  # One POST per record, with the record's identity in mq_bridge.message_id.
  to http { url = "http://127.0.0.1:8080/orders" }`,
	"object_store": `  # Immutable objects named by source position: a replay rewrites the same names.
  to object_store { url = "file://out/objects", name_by = auto }`,
	"redis": `  # XADD carrying the record's identity; a stream cannot absorb a replay.
  to redis {
    url    = "redis://127.0.0.1:6379"
    stream = "orders-out"
  }`,
}

func runInit(args []string, stdout, stderr io.Writer) int {
	c := commands["init"]
	fs := newFlags(c, stderr)
	from := fs.String("from", "file", "source kind: "+strings.Join(sortedKeys(starterSources), ", "))
	to := fs.String("to", "sql", "sink kind: "+strings.Join(sortedKeys(starterSinks), ", "))
	out := fs.String("o", "", "write to FILE (refused when it exists) instead of stdout")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	src, ok := starterSources[*from]
	if !ok {
		fmt.Fprintf(stderr, "mqbc init: --from %s: not a source kind init knows; one of %s\n", *from, strings.Join(sortedKeys(starterSources), ", "))
		return exitUsage
	}
	snk, ok := starterSinks[*to]
	if !ok {
		fmt.Fprintf(stderr, "mqbc init: --to %s: not a sink kind init knows; one of %s\n", *to, strings.Join(sortedKeys(starterSinks), ", "))
		return exitUsage
	}
	text := starter(*from, src, *to, snk)
	if *out == "" {
		fmt.Fprint(stdout, text)
		return exitOK
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, "mqbc init:", err)
		return exitError
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		fmt.Fprintln(stderr, "mqbc init:", err)
		return exitError
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(stderr, "mqbc init:", err)
		return exitError
	}
	fmt.Fprintf(stderr, "mqbc init: wrote %s; see its guarantee with: mqbc build %s\n", *out, *out)
	return exitOK
}

func starter(from, src, to, snk string) string {
	return fmt.Sprintf(`# A starter pipeline: %s → %s. mqbc build prints the delivery guarantee
# it proves for the route and why; mqbc run runs it. Reference: docs/reference.md.

route %s_to_%s {
%s

  # The record's identity: the same on every replay of it, so a sink can
  # recognise a repeat. Name a field that identifies a record.
  id payload.id

  # Records that fail (bad JSON, a refused row) go here with the reason,
  # and the route goes on; without a dlq the route stops at such a record.
  dlq { to file { path = "out/dead-letters.jsonl" } }

%s
}
`, from, to, from, to, src, snk)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
