package diag

import "strings"

// CodeDoc documents one stable diagnostic code. `mqbc explain CODE` prints it
// and `mqbc docs` lists the whole table.
type CodeDoc struct {
	Code    string
	Title   string // short name of the mistake
	Doc     string // why it is a problem and what to do instead
	Example string // a .mqb fragment that triggers it
}

// Codes is the one table of every code mqb reports. Codes are never reused:
// retire a code by marking its Doc, not by deleting the row.
var Codes = []CodeDoc{
	{"E001", "syntax error", "The file does not follow the .mqb grammar at this point. The message names what the parser expected.", "route r {\n  from file { path = \"a\" \n"},
	{"E002", "bad literal", "A string, raw block, number or duration is malformed: an unterminated string, an unknown escape, a duration with an unknown unit.", "ttl = 10years"},
	{"E003", "build too large", "One build accepts at most 16 MiB of source, two million tokens and 10,000 routes, all files together. Checking a route holds tens of KiB of memory, so a generated file of a million routes would exhaust it; the build stops before the expensive stage instead. Split the routes over several files built and run separately (one `mqbc run` per group).", "route r1 { … }\n… (10,001 routes)"},
	{"E010", "duplicate route name", "Route names identify checkpoints and dedup state; two routes with one name would share them.", "route a { … }\nroute a { … }"},
	{"E011", "unknown ref", "`ref NAME` must name an endpoint declared in the files being built (`output NAME = kind { … }`).", "to ref enrichh"},
	{"E012", "unknown endpoint kind", "The kind after `from`, `to`, `handle`, `call` or `forward` is not one the standard library declares.", "to sqll { … }"},
	{"E013", "unknown attribute", "The block sets an attribute its kind does not declare. mq-bridge ignores unknown keys; mqb refuses them because a typo would silently change behaviour.", "from file { pth = \"a.jsonl\" }"},
	{"E014", "unknown step", "A route statement names no step the standard library declares.", "dedupe { key = payload.id }"},
	{"E015", "wrong value type", "The attribute's value has a different type than its declaration (a string where a duration is expected, say).", "ttl = \"1h\""},
	{"E016", "missing required attribute", "The kind declares this attribute as required and the block does not set it.", "to sql { url = \"sqlite://a.db\" }"},
	{"E017", "invalid enum value", "The attribute takes one of a fixed set of identifiers.", "mode = tail"},
	{"E018", "duplicate attribute", "An attribute is set twice in one block; only one value can win, so neither does.", "path = \"a\"\npath = \"b\""},
	{"E019", "bad route structure", "A route needs exactly one `from`, then steps, then exactly one `to`; settings come first.", "route r { to file { path = \"x\" } }"},
	{"E020", "expression does not compile", "Expressions are expr-lang over payload, meta, message_id and env(\"NAME\"). An unknown variable or function, or a type error, is reported here instead of failing at run time.", "filter paylod.total > 0"},
	{"E021", "template cannot resolve", "A `${…}` placeholder in a string does not compile. mq-bridge only warns and silently falls back to message_id; mqb refuses.", "key = \"${payload:}\""},
	{"E022", "attribute misuse", "The attribute is valid but cannot be used where it is written (a kind that cannot be a source used in `from`, a sink-only kind used as a source, an environment variable in a non-template attribute).", "from switch { … }"},
	{"E023", "duplicate endpoint name", "Named endpoints are referred to by name (`to ref NAME`); two declarations with one name would make the ref ambiguous.", "output enrich = http { … }\noutput enrich = sql { … }"},
	{"E024", "ref cycle", "A named endpoint reaches itself through refs in its branches (a switch case or fanout target naming the endpoint that holds it), so it would expand forever.", "output a = fanout { to ref a }"},
	{"E025", "url the runtime cannot open", "A url must use a scheme its kind runs (the kind's reference lists them) and have the shape that scheme needs (sqlite://PATH, a host for http, nats, clickhouse, mongodb and gs). `sqlite:out.db` or `postgres//x` would build and then fail at start-up; mqb refuses them at build. A url whose scheme comes from a placeholder (`${env(\"DB_URL\")}`) is checked at run time.", "to sql { url = \"sqlite:out.db\" }"},
	{"E026", "format the runtime cannot run", "The kind's reader or writer does not implement this format (there is no csv reader: a file source takes json, text or raw); the route would fail at start-up, so the build refuses it.", "from file { path = \"orders.csv\", format = csv }"},
	{"E027", "end not run by this runtime", "The language declares this end of the kind, but this runtime has no reader or writer for it yet; the route would fail at start-up, so the build refuses it. The detail says what is missing.", "from mongodb { url = \"mongodb://127.0.0.1\", database = \"shop\", collection = \"orders\" }"},
	{"E028", "key path where a plain name belongs", "A key written as a path (`payload.customer.email`, `meta[\"k\"]`) or a `del` is a map step's target, and a map target starts at payload or meta and names one meta key. Anywhere else a key is a plain name, such as `path`; inside map a bare name (`total = …`) is a top-level payload field.", "to file { payload.path = \"out.jsonl\" }"},
	{"E029", "map writes a reserved meta key", "Keys under mqb. belong to mqb: meta[\"mqb.id\"] is the record's identity, which only an `id` step sets (the proof of every keyed write rests on it), and the runtime sets the others (mqb.error, mqb.src.*). A map step may set or delete any other key.", "map { meta[\"mqb.id\"] = payload.order_id }"},
	{"E030", "input-only step on the output side", "`id` and `dedup` act on records as they arrive from the source; after `handle` or an output-only step they would run once per sink attempt. mq-bridge makes this a startup error; mqb makes it a build error.", "retry { attempts = 3 }\ndedup { key = payload.id }"},
	{"E031", "output-only step on the input side", "`retry` and `dlq` wrap the sink write and cannot appear before the record reaches the output side.", ""},
	{"E032", "meta[\"mqb.id\"] read before it is set", "A step reads meta[\"mqb.id\"] above the `id` step that sets it (or with no `id` step at all), so it would see an empty value on every record and dedup would silently fall back to message_id. Move `id` above it.", "dedup { key = meta[\"mqb.id\"] }\nid payload.order_id"},
	{"E040", "source_position needs a replayable source", "`name_by = source_position` names files by the source's position. The source has no position at all (NATS, for one), so names could not be honoured. A file followed in subscribe or group_subscribe mode is allowed with a run epoch in the names and is at-least-once (W020).", "from nats { … }\nto file { name_by = source_position }"},
	{"E042", "bulk_copy with a conflict clause", "COPY cannot express ON CONFLICT; pick bulk speed or deduplication.", "bulk_copy = true\ninsert_query = \"… ON CONFLICT (id) DO NOTHING\""},
	{"E043", "report_outcome without a deterministic key", "Without a stable key (Mongo id_field, SQL conflict columns bound to stable values) there is no duplicate to detect, so the outcome would always be `inserted`.", "to mongodb { report_outcome = true }"},
	{"E044", "report_outcome with request_reply", "request_reply switches the publisher to the reply-polling path, which never reports an outcome.", "report_outcome = true\nrequest_reply = true"},
	{"E045", "guarantee not proven", "The route declares `guarantee effectively_once` but the checker cannot prove it; the message names the missing piece.", "guarantee effectively_once\nfrom file { … }\nto nats { … }"},
	{"E046", "placeholder inside SQL quotes", "A ${…} in insert_query becomes a bound parameter; inside an SQL string literal, a quoted identifier or a comment it would be sent as text instead, so the statement's parameters do not match and every write fails. Build the whole value in one placeholder outside the quotes: VALUES (${\"ord-\" + payload.id}).", "insert_query = \"INSERT INTO t (id) VALUES ('ord-${payload.id}')\""},
	{"E050", "mqb.src.* key the source never sets", "A step reads a provenance key `meta[\"mqb.src.…\"]` that the route's source never sets (each source declares the keys it sets: kafka mqb.src.topic/partition/offset, nats mqb.src.subject/stream/stream_sequence, the last two with JetStream only; file mqb.src.file/line), so every record would see an empty value and a key built on it would collapse every record into one.", "from file { path = \"in.jsonl\" }\nid meta[\"mqb.src.offset\"]"},
	{"E051", "two sinks write positional parts into one directory", "Two sinks (usually of two routes) write `name_by = source_position` parts into the same directory or object prefix. Each skips the source positions that the part names already there cover, so the second would take the first one's parts for its own records and drop them as already written. Give each route its own directory.", "route a { from file { path = \"x/orders.jsonl\" } to file { path = \"parts\", name_by = source_position } }\nroute b { from file { path = \"y/orders.jsonl\" } to file { path = \"parts\", name_by = source_position } }"},
	{"E052", "group_subscribe over a glob", "A file source in group_subscribe mode follows one file through its rotations, finding it again by inode under its new name. A glob or a directory names many files, and a rotated name is one more of them, so its records would be read twice. Read a glob in consume mode (every file to its end, resuming in the file it stopped in) or subscribe mode, or give group_subscribe one file.", "from file { path = \"logs/*.log\", mode = group_subscribe }"},
	{"E060", "unnest after a dedup", "A dedup promotes a record's key once the record is acked, and unnest acks its parent only when every element is delivered or dead-lettered; from above unnest a dedup could not give the parent's key back when one element failed, and a rerun would drop the whole parent as a duplicate. Dedup the elements instead, after unnest, on meta[\"mqb.id\"] (the parent's identity and the element's index).", "dedup { key = payload.order_id }\nunnest payload.items"},
	{"E061", "positional parts after an unnest whose numbering can change", "Positional parts (name_by = source_position) name and skip each element by its record's source position and its index among the elements unnest made of the record, so a part may end inside a record's elements and a replay writes the rest. That needs the index to name the same element on every replay: the array unnest reads must be stable, and nothing per-delivery (a filter, a map or a parse on a per-delivery value) may decide which records are live between one unnest and a later one, which numbers the elements of the live records. Make those stable, write the elements to a key-addressed sink keyed on meta[\"mqb.id\"] (the parent's identity and the element's index), or name the parts by write_time (at-least-once).", "map { payload.items = [string(now())] }\nunnest payload.items\nto file { path = \"parts\", name_by = source_position }"},
	{"E062", "dead-letter target named by source position", "A dlq writes a record when it fails, and which records fail is decided anew on every delivery: a write that failed once can succeed on the replay, and another can fail. Parts named for the range of source positions they cover (name_by = source_position, or the deprecated idempotency = true) would then let a replay skip a record that failed only on the replay, as if it were dead-lettered already, so the runtime writes a dead-letter file or object by time and refuses the plan. Leave name_by unset or write_time (auto, an object store's default, resolves to write_time under a dlq): the dlq is at-least-once, a crash between its write and the commit writing the record again. For an effectively-once dlq, dead-letter into a key-addressed sink: sql with ON CONFLICT on meta[\"mqb.id\"].", "dlq { to file { path = \"dead\", name_by = source_position } }"},
	{"E063", "RETURNING in a SQLite insert_query", "A sink discards the rows RETURNING gives back, and SQLite keeps a statement with RETURNING open until they are read, so the batch's commit fails with \"SQL statements in progress\" on every run: what builds must run, so the build refuses it. Drop the RETURNING clause (report_outcome = true sets meta[\"sql.outcome\"] to inserted or existed).", "insert_query = \"INSERT INTO t (id) VALUES (${payload.id}) ON CONFLICT (id) DO NOTHING RETURNING id\""},
	{"E064", "create_table that cannot run again", "A sql sink runs its create_table each time the route starts, and a route starts again after every crash or restart. A CREATE TABLE or CREATE INDEX without IF NOT EXISTS then fails with \"already exists\", so the route can never resume; DROP TABLE, CREATE OR REPLACE, DELETE or ALTER would drop or change rows an earlier run committed, which no verdict survives. The build refuses both: write each statement as CREATE … IF NOT EXISTS and run other DDL once, outside mqb.", "create_table = \"CREATE TABLE orders (id TEXT PRIMARY KEY, body TEXT)\""},
	{"W001", "dedup keyed on a per-delivery id", "The source mints a fresh message_id per read, so a dedup keyed on it dedupes nothing across a replay. Key on a business field or meta[\"mqb.id\"].", "from file { … }\ndedup { key = message_id }"},
	{"W002", "dedup keyed on identity on a CDC route", "Identity is not a version: every update of a row shares one business key and would collapse into one. Keep the default message_id, which includes the LSN.", "from postgres_cdc { … }\nid payload.id\ndedup { key = meta[\"mqb.id\"] }"},
	{"W003", "switch without default", "Records matching no case are dropped (and counted). A failed request forwards the original record, which may match nothing.", "to switch { on = meta[\"x\"]  case \"a\" { … } }"},
	{"W004", "concurrency > 1 into a write_time object store", "Names are minted inside the worker pool, so key order becomes arrival order and replays can reorder updates to one key.", "concurrency = 4\nto object_store { name_by = write_time }"},
	{"W005", "date_partition ignored", "Under source_position parts are written flat under the prefix; the name already carries the range.", "name_by = source_position\ndate_partition = true"},
	{"W006", "plain INSERT without a conflict clause", "A replay fails the row as a non-retryable constraint error (to the DLQ) or inserts it twice. Add ON CONFLICT … DO NOTHING / ON DUPLICATE KEY UPDATE.", "insert_query = \"INSERT INTO t (id) VALUES (${payload.id})\""},
	{"W007", "deprecated idempotency", "`idempotency = true|false` is the old spelling of `name_by = source_position|write_time`; an explicit name_by wins.", "idempotency = true"},
	{"W008", "password written in the file", "A password attribute holds literal text, so the secret lives in the .mqb file (and in version control). Read it from the environment instead: password = \"${env(\\\"KAFKA_PASSWORD\\\")}\". Plans and logs redact it either way.", "password = \"hunter2\""},
	{"W009", "IGNORE skips more than repeats", "SQLite's INSERT OR IGNORE skips a row for any constraint it breaks, and MySQL's INSERT IGNORE turns every error into a warning (a refused value is stored as the column's default or cut to fit): a record with a NULL in a NOT NULL column, a value out of range or a CHECK it fails is not written as it was, never reaches the DLQ, and is counted as written. ON CONFLICT (k) DO NOTHING (SQLite, PostgreSQL) or ON DUPLICATE KEY UPDATE k = k (MySQL) absorbs repeats and lets every other refusal reach the DLQ.", "insert_query = \"INSERT OR IGNORE INTO t (id, body) VALUES (${payload.id}, ${payload.body})\""},
	{"W020", "source_position over a follow-mode file", "A file read in subscribe or group_subscribe mode numbers records from 0 on every run, so positional part names carry a run epoch: they stay distinct and in run order, but records re-read after a crash are written again under new names. The route is at-least-once (allowed, not rejected). Read the file in consume mode for positional deduplication.", "from file { path = \"in.jsonl\", mode = group_subscribe }\nto file { path = \"parts\", name_by = source_position }"},
	{"W021", "key depends on env()", "An `id` or `dedup` key, or the key a sink's write is addressed by (a conflict column of insert_query, a mongodb id_field, a clickhouse column its ReplacingMergeTree sorting key may include), reads an environment variable: it is the same on every replay only while every run sees the same value. A restart with another value gives every record a new key, so replays are no longer recognised.", "id env(\"PREFIX\") + payload.id"},
}

// Lookup returns the documentation of code (case-insensitive).
func Lookup(code string) (CodeDoc, bool) {
	code = strings.ToUpper(code)
	for _, c := range Codes {
		if c.Code == code {
			return c, true
		}
	}
	return CodeDoc{}, false
}

// SeverityOf derives the severity from the code's letter.
func SeverityOf(code string) Severity {
	if strings.HasPrefix(code, "W") {
		return Warning
	}
	return Error
}
