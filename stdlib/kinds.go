package stdlib

var (
	formatAttr = Attr{Name: "format", Type: Enum, Enum: []string{"json", "text", "raw", "csv"}, Default: "json",
		Doc: "Record encoding: json (one JSON document per line), text (one line, payload is the string), raw (bytes as they are), csv."}
	nameByAttr = Attr{Name: "name_by", Type: Enum, Enum: []string{"write_time", "source_position", "auto"}, Default: "write_time",
		Doc: "How written objects are named. write_time appends / names by write order; source_position writes immutable part files named for the source positions they cover, so a replay is recognised (needs a replayable source); auto (object_store only) picks source_position when the source has a position."}
	idempotencyAttr = Attr{Name: "idempotency", Type: Bool, Deprecated: "name_by",
		Doc: "Deprecated spelling of name_by: true is source_position, false is write_time. An explicit name_by wins."}
	sourceMetadataAttr = Attr{Name: "source_metadata", Type: Bool, Default: false,
		Doc: "Add mqb.src.* provenance keys (topic, partition, offset) to meta. Turned on automatically under name_by = source_position."}
	reportOutcomeAttr = Attr{Name: "report_outcome", Type: Bool, Default: false,
		Doc: "Tag each written record with meta[\"<kind>.outcome\"] = inserted | existed. Needs a deterministic key."}
	requestReplyAttr = Attr{Name: "request_reply", Type: Bool, Default: false,
		Doc: "Wait for a reply to every published record and forward it."}
)

// Kinds declares every endpoint kind.
var Kinds = []Kind{
	{
		Name: "file", Source: true, Sink: true,
		Doc:           "A local file of records. As a source, reads JSON lines (or text/raw); as a sink, appends (write_time) or writes immutable part files (source_position).",
		IDNote:        "message_id is a fresh UUIDv7 per read: re-reading the same file produces new ids. Use `id` to derive a stable identity.",
		PositionModes: []string{"consume"},
		Absorb:        AbsorbNone,
		Attrs: []Attr{
			{Name: "path", Type: String, Required: true, Doc: "File to read or append to; under name_by = source_position, the directory that receives part files."},
			{Name: "mode", Type: Enum, Enum: []string{"consume", "subscribe", "group_subscribe"}, Default: "consume",
				Doc: "Source mode. consume reads from byte 0 and numbers records by index (replayable); subscribe follows the end of the file; group_subscribe resumes from a byte offset kept in the checkpoint store."},
			formatAttr, nameByAttr, idempotencyAttr,
			{Name: "checkpoint_store", Type: String, Default: "pebble://.mqb/state", Doc: "Where group_subscribe keeps its byte offset, and where consume keeps its committed record index."},
			{Name: "max_record_bytes", Type: Int, Default: int64(16 << 20), Doc: "Longest line accepted; a longer one goes to the DLQ."},
		},
	},
	{
		Name: "sql", Source: true, Sink: true,
		Doc:           "A SQL database: sqlite://, postgres://, mysql://. As a sink, runs insert_query per record with every ${…} bound as a parameter; as a source, pages a table by cursor_column.",
		StableIDs:     true,
		IDNote:        "As a cursor source, message_id is derived from the table and the cursor value, stable across replays.",
		PositionModes: []string{"*"},
		Absorb:        AbsorbConflict,
		Schemes:       []string{"sqlite", "postgres", "postgresql", "mysql"},
		Attrs: []Attr{
			{Name: "url", Type: String, Required: true, Secret: true, Template: true, Doc: "Connection URL: sqlite://path.db, postgres://user:pass@host/db, mysql://user:pass@host/db."},
			{Name: "table", Type: String, Doc: "Table to read (source) or, without insert_query, to insert the payload's fields into (sink)."},
			{Name: "insert_query", Type: String, Template: true, Query: true, Doc: "INSERT statement; every ${…} becomes a bound parameter. Its conflict clause decides whether the write is idempotent."},
			{Name: "query", Type: String, Doc: "Source query instead of table; must select cursor_column."},
			{Name: "bulk_copy", Type: Bool, Default: false, Doc: "Load with Postgres COPY. Cannot be combined with a conflict clause."},
			{Name: "cursor_column", Type: String, Doc: "Source: the column to page by. For positional naming it must be a unique non-negative integer."},
			reportOutcomeAttr,
			{Name: "create_table", Type: String, Doc: "DDL run once at start-up (e.g. CREATE TABLE IF NOT EXISTS …)."},
			{Name: "poll_interval", Type: Duration, Default: "1s", Doc: "Source: how long to wait before polling again at the end of the table."},
		},
	},
	{
		Name: "kafka", Source: true, Sink: true, Broker: true,
		Doc:           "A Kafka topic (any Kafka-protocol broker).",
		StableIDs:     true,
		IDNote:        "message_id is the mq_bridge.message_id header if present, else a 16-byte key, else partition<<64 | offset: stable across replays.",
		PositionModes: []string{"*"},
		Absorb:        AbsorbNone,
		Schemes:       []string{"kafka", ""},
		Attrs: []Attr{
			{Name: "url", Type: String, Required: true, Secret: true, Template: true, Doc: "Bootstrap broker(s), host:port[,host:port]."},
			{Name: "topic", Type: String, Required: true, Doc: "Topic to read or write."},
			{Name: "group_id", Type: String, Doc: "Consumer group; offsets are committed only up to the contiguous acked position."},
			{Name: "checkpoint_store", Type: String, Default: "pebble://.mqb/state", Doc: "Source without group_id: where each partition's next offset is kept."},
			formatAttr, sourceMetadataAttr,
			{Name: "partition_key", Type: String, Template: true, Doc: "Sink: message key, may be a template such as \"${meta[\\\"mqb.id\\\"]}\"."},
			{Name: "username", Type: String, Template: true, Doc: "SASL user name; with password, the client authenticates with sasl_mechanism."},
			{Name: "password", Type: String, Secret: true, SecretValue: true, Template: true, Doc: "SASL password, e.g. \"${env(\\\"KAFKA_PASSWORD\\\")}\"."},
			{Name: "sasl_mechanism", Type: Enum, Enum: []string{"plain", "scram_sha_256", "scram_sha_512"}, Doc: "SASL mechanism, plain when unset (PLAIN sends the password as is: use it over tls)."},
			{Name: "tls", Type: Bool, Doc: "Connect over TLS, verifying the brokers' certificates against the system roots or tls_ca_file. Any tls_* attribute turns it on."},
			{Name: "tls_ca_file", Type: String, Doc: "PEM file of the CA(s) that signed the brokers' certificates (relative to the .mqb file)."},
			{Name: "tls_cert_file", Type: String, Doc: "PEM client certificate, for brokers that require mutual TLS (with tls_key_file)."},
			{Name: "tls_key_file", Type: String, Doc: "PEM private key of tls_cert_file."},
			{Name: "tls_skip_verify", Type: Bool, Doc: "Do not verify the brokers' certificates (test clusters only: anyone on the path can read and alter the stream)."},
		},
	},
	{
		Name: "nats", Source: true, Sink: true, Broker: true,
		Doc:       "A NATS subject, with JetStream (default) or core NATS.",
		StableIDs: true,
		IDNote:    "With JetStream, message_id is taken from the mq_bridge.message_id / Nats-Msg-Id header when present; a subject is not a replayable position.",
		Absorb:    AbsorbNone,
		Schemes:   []string{"nats"},
		Attrs: []Attr{
			{Name: "url", Type: String, Required: true, Secret: true, Template: true, Doc: "Server URL, nats://host:port."},
			{Name: "subject", Type: String, Required: true, Template: true, Doc: "Subject to subscribe or publish to."},
			{Name: "stream", Type: String, Doc: "JetStream stream name."},
			{Name: "durable", Type: String, Doc: "JetStream durable consumer name."},
			{Name: "no_jetstream", Type: Bool, Default: false, Doc: "Use core NATS (no persistence, no acks): as a source, at-most-once."},
			{Name: "ack_wait", Type: Duration, Default: "30s", Doc: "Source (JetStream): how long the server waits for an ack before redelivering; also how long messages in flight at a crash wait before the restarted route sees them."},
			formatAttr,
			requestReplyAttr, sourceMetadataAttr,
		},
	},
	{
		Name: "postgres_cdc", Source: true, CDC: true,
		Doc:           "PostgreSQL logical replication (pgoutput): every insert, update and delete as a record carrying the full row.",
		StableIDs:     true,
		IDNote:        "message_id is a stable hash of schema.table + key + LSN: a replayed change has the same id, a new revision a new one.",
		PositionModes: []string{"*"},
		Schemes:       []string{"postgres", "postgresql"},
		Attrs: []Attr{
			{Name: "url", Type: String, Required: true, Secret: true, Template: true, Doc: "postgres://user:pass@host/db (replication privileges)."},
			{Name: "publication", Type: String, Required: true, Doc: "Publication to stream (created FOR ALL TABLES if absent)."},
			{Name: "slot_name", Type: String, Required: true, Doc: "Replication slot (created if absent)."},
			{Name: "temporary_slot", Type: Bool, Default: false, Doc: "Use a temporary slot that disappears with the connection."},
			{Name: "checkpoint_store", Type: String, Doc: "A second, per-ack durable position (pebble://dir) that survives an unclean stop."},
		},
	},
	{
		Name: "clickhouse", Sink: true,
		Doc:     "A ClickHouse table over the native protocol. Effectively-once only into a ReplacingMergeTree table (verified at run start-up).",
		Absorb:  AbsorbEngine,
		Schemes: []string{"clickhouse", "tcp"},
		Attrs: []Attr{
			{Name: "url", Type: String, Required: true, Secret: true, Template: true, Doc: "clickhouse://user:pass@host:9000/db."},
			{Name: "table", Type: String, Required: true, Doc: "Target table."},
			{Name: "columns", Type: Block, Doc: "column = <expr> pairs; default: the payload's top-level fields."},
			{Name: "version", Type: Expr, Doc: "Version expression for ReplacingMergeTree (e.g. meta[\"postgres.lsn\"])."},
		},
	},
	{
		Name: "object_store", Source: true, Sink: true,
		Doc:           "Objects under a prefix of a bucket (gs://bucket/prefix) or a local directory (file:///dir). As a source, reads every object under the prefix in key order (*.gz and *.zst decompressed), one record per line, and ends at the end of the listing (or, with poll_interval, keeps listing); the next run resumes after the last committed line, so the prefix should grow at the end of its key order (as this sink writes it) with objects never rewritten.",
		IDNote:        "As a source, message_id is a fresh UUIDv7 per read; the position is the object key and line.",
		PositionModes: []string{"*"},
		Absorb:        AbsorbNone,
		Schemes:       []string{"gs", "file"},
		Attrs: []Attr{
			{Name: "url", Type: String, Required: true, Secret: true, Template: true, Doc: "gs://bucket/prefix or file:///dir."},
			{Name: "name_by", Type: Enum, Enum: []string{"write_time", "source_position", "auto"}, Default: "auto", Doc: nameByAttr.Doc},
			idempotencyAttr, formatAttr,
			{Name: "date_partition", Type: Bool, Default: false, Doc: "Write under YYYY/MM/DD/ prefixes (write_time only; ignored under source_position)."},
			{Name: "compression", Type: Enum, Enum: []string{"none", "gzip", "zstd"}, Default: "none", Doc: "Object compression."},
			{Name: "max_object_bytes", Type: Int, Default: int64(64 << 20), Doc: "Largest object written; a larger batch is split."},
			{Name: "checkpoint_store", Type: String, Doc: "Source: where the committed position (object key and line) is kept; default pebble://.mqb/state."},
			{Name: "max_record_bytes", Type: Int, Doc: "Source: longest line accepted (default 16 MiB); a longer one goes to the DLQ."},
			{Name: "poll_interval", Type: Duration, Doc: "Source: follow the prefix, listing it again this often for objects that sort after the last one read (the route runs until stopped). Unset: end at the end of the listing."},
		},
	},
	{
		Name: "mongodb", Source: true, Sink: true,
		Doc:           "A MongoDB collection.",
		IDNote:        "As a capture source, the position is the snapshot index then the change-stream token.",
		PositionModes: []string{"*"},
		Absorb:        AbsorbKeyField,
		Schemes:       []string{"mongodb", "mongodb+srv"},
		Attrs: []Attr{
			{Name: "url", Type: String, Required: true, Secret: true, Doc: "mongodb://host:27017."},
			{Name: "database", Type: String, Required: true, Doc: "Database name."},
			{Name: "collection", Type: String, Required: true, Doc: "Collection name."},
			{Name: "id_field", Type: String, Template: true, Doc: "Top-level payload field (or a template such as \"${meta[\\\"mqb.id\\\"]}\") whose value becomes _id: a repeat hits the unique _id index and is absorbed."},
			reportOutcomeAttr, requestReplyAttr, formatAttr,
		},
	},
	{
		Name: "http", Sink: true,
		Doc:    "An HTTP endpoint: each record is one request to url with the payload as the body, the header `mq_bridge.message_id` = message_id and every forwarded meta entry as `Mqb-Meta-<key>` (characters a header name cannot hold sent as %XX). A 2xx answer is success; 408, 429, 5xx, a network error or a timeout fails the batch (a `retry` step sends it again); any other status sends the record to the DLQ with the status and the start of the response. As a request's `call`, a non-empty response body replaces the payload and meta[\"http.status\"] holds the status.",
		Absorb: AbsorbNone,
		Attrs: []Attr{
			{Name: "url", Type: String, Required: true, Secret: true, Template: true, Doc: "Target http:// or https:// URL, rendered per record."},
			{Name: "method", Type: Enum, Enum: []string{"POST", "PUT"}, Default: "POST", Doc: "HTTP method."},
			{Name: "timeout", Type: Duration, Default: "10s", Doc: "Time for one request's whole exchange; a slower answer fails the batch, retryably."},
		},
	},
	{
		Name: "switch", Sink: true, Structural: true, Absorb: AbsorbStructural,
		Doc: "Routes each record to the first case whose value equals `on`, else to default (or drops and counts it). A case takes one value (`case \"DE\" { … }`): for several values write one case per value; several cases can name one output with `to ref NAME`.",
		Attrs: []Attr{
			{Name: "on", Type: Expr, Required: true, Doc: "Expression compared with each case value (as a string)."},
		},
	},
	{
		Name: "request", Sink: true, Structural: true, Absorb: AbsorbStructural,
		Doc: "Calls one endpoint and forwards its response (or, on error, the original record) to another.",
	},
	{
		Name: "fanout", Sink: true, Structural: true, Absorb: AbsorbStructural,
		Doc: "Writes each record to every nested `to`; acked when all succeed.",
	},
}
