package stdlib

// Steps declares every route step.
var Steps = []Step{
	{
		Name: "id", Side: InputOnly, ExprArg: true,
		Doc: "Derives a replay-stable identity from the record and stores it, as a string, in meta[\"mqb.id\"]. The key is set only when every selector resolves; a record missing a field keeps no identity (and a keyed sink dead-letters it).",
	},
	{
		Name: "dedup", Side: InputOnly,
		Doc: "Drops repeats before the sink: reserves a key on receive (in-flight for 5 s), promotes it to processed on ack, and acks duplicates straight back to the source.",
		Attrs: []Attr{
			{Name: "key", Type: Expr, Default: "message_id", Doc: "The dedup key. Keep it stable: message_id of a file source is fresh per read."},
			{Name: "store", Type: String, Default: "pebble://.mqb/dedup", Secret: true, Doc: "pebble://dir on one machine, or postgres:// / mysql:// shared by instances: a live instance renews the keys its batches hold, and a dead one's come free after 5 s; the instances' clocks must agree to within 5 s."},
			{Name: "ttl", Type: Duration, Default: "24h", Doc: "How long a processed key is remembered."},
			{Name: "namespace", Type: String, Doc: "Shares the keys with every dedup step that names the same namespace, in any route (cross-route dedup): a record whose key another of them delivered is dropped here as a duplicate. Use it only for routes that load the same sink. Left unset, each route (and each dedup step within it) has a key space of its own, even in a store other routes use; instances of one route (scale-out on a shared SQL store) always share theirs."},
			{Name: "keep", Type: Bool, Doc: "Run this dedup even where the compiler finds it redundant: when it is the last step before an sql sink whose conflict clause keeps the first row of its key and absorbs every repeat (ON CONFLICT (k) DO NOTHING, k one column bound to this key), at concurrency 1, the compiler leaves it out of the plan and says so in the verdict; the sink drops what it would have, and its absorbed repeats are counted as deduplicated. One difference: a key whose first record the sink refuses (dead-lettered) gets its next record written, where the dedup would have dropped it."},
		},
	},
	{
		Name: "filter", Side: Both, ExprArg: true,
		Doc: "Keeps records for which the boolean expression is true; the others are acked and counted as filtered.",
	},
	{
		Name: "map", Side: Both, Free: true,
		Doc: "Rewrites the record, one target per line: `field = <expr>` sets a top-level payload field (payload.field); " +
			"`payload.customer.email = <expr>` a nested one, creating the objects on the way that are missing " +
			"(a record where a value on the way exists and is not an object, null included, goes to the DLQ naming the path); " +
			"`payload = <expr>` replaces the whole payload with any JSON value (`payload = {\"line\": payload}` wraps a text line); " +
			"`meta[\"k\"] = <expr>` sets a metadata key, its value rendered as a string (the keys under mqb. are reserved: E029); " +
			"`del payload.tmp` and `del meta[\"k\"]` delete (deleting a field that is not there does nothing). " +
			"Every value is computed from the record as it entered the block, then the targets are written in the order given; " +
			"two targets where one lies inside the other (payload and payload.a, payload.a and payload.a.b, a set and a del of one path) are E018: write them in two map blocks. " +
			"A block that writes a payload field needs an object payload; one that only replaces the payload or writes meta takes any.",
	},
	{
		Name: "parse", Side: Both,
		Doc: "Turns a text line (a `format = text` source, or a payload that is a JSON string) into a JSON object that replaces the payload; a record it cannot parse goes to the DLQ with the reason. Deterministic: fields read after it are as stable as the line.",
		Attrs: []Attr{
			{Name: "format", Type: Enum, Enum: []string{"json", "logfmt", "regex", "csv"}, Required: true,
				Doc: "json: the line is a JSON document; logfmt: key=value pairs (values quoted or bare, a bare key is true); regex: the named groups of pattern; csv: one CSV record, named by columns."},
			{Name: "pattern", Type: String, Doc: "format = regex: a Go regular expression with named groups, (?P<name>…); the line must match it."},
			{Name: "columns", Type: List, Elem: String, Doc: "format = csv: the names of the fields, in order; the line must have as many."},
		},
	},
	{
		Name: "unnest", Side: InputOnly, PathArg: true,
		Doc: "Emits one record per element of the array at a payload path (`unnest payload.items`): the element becomes the payload, " +
			"or, with `as item`, the parent's payload is kept with the array taken out and the element put under payload.item. " +
			"Each record gets a derived identity, the parent's and the element's index: meta[\"mqb.id\"] is a UUIDv5 of the parent's meta[\"mqb.id\"] " +
			"(of its message_id when no id step ran) and the index, and message_id a UUIDv5 of the parent's message_id and the index, " +
			"so a replay of the parent gives its elements the same ids. On an effectively-once route over a source whose message_id is new on every read, " +
			"a record whose id step above unnest renders no value goes to the DLQ (its elements would get new ids on a replay). " +
			"The derived id is stable when the parent's identity is stable and the array is " +
			"(a field of the payload as read, or of a stable map); key the sink on meta[\"mqb.id\"]. " +
			"The parent's position is committed only once every element is delivered, filtered or dead-lettered. " +
			"An empty array emits nothing: the parent is acked and counted as filtered. A payload where the path holds no array " +
			"(missing, null, an object, a scalar) goes to the DLQ with the reason. A dedup cannot stand before unnest (E060): put it after, keyed on meta[\"mqb.id\"]. " +
			"Parts named by source_position name each element by its record's position and its index there, so a part may end inside a record's elements and a replay writes the rest; " +
			"they are refused (E061) where a replay may number the elements differently: a per-delivery array, or a per-delivery filter, map or parse between two unnests.",
	},
	{
		Name: "retry", Side: OutputOnly,
		Doc: "Retries a failed sink write with exponential backoff; only retryable errors (connection, deadlock, timeout) are retried.",
		Attrs: []Attr{
			{Name: "attempts", Type: Int, Default: int64(5), Doc: "Total attempts including the first."},
			{Name: "backoff", Type: Duration, Default: "100ms", Doc: "First wait; doubles each attempt."},
			{Name: "max_backoff", Type: Duration, Default: "30s", Doc: "Longest wait between attempts."},
		},
	},
	{
		Name: "dlq", Side: OutputOnly, Nested: true,
		Doc: "Dead-letter queue: a record that fails for good goes to the nested `to` endpoint with meta[\"mqb.error\"] holding the reason. Which records fail is decided anew on every delivery, so a file or object_store target is written by time: name_by = source_position (or idempotency = true) is refused there (E062), and an object store's auto resolves to write_time. Such a dlq is at-least-once (a crash between its write and the commit writes the record again); a key-addressed target (sql with ON CONFLICT on meta[\"mqb.id\"] or meta[\"mqb.src.line\"]) makes it effectively-once, with its start-up premises (the table's unique index) checked before the first record as on any sink; a key every dead letter may not have (a payload field: NULL never conflicts) leaves it at-least-once, since a dead-letter target has no dlq of its own for a record that breaks a per-record premise. A file or stdout target writes each dead letter as one JSON line: {\"error\", \"position\", \"meta\", and \"payload\" (a JSON record) or \"raw\" (any other line; one that is not UTF-8 also as \"raw_base64\", its bytes exactly)}.",
	},
}
