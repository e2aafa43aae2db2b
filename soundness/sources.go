package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
)

// The sources besides the file and NATS JetStream: a topic of the
// in-process Kafka-protocol broker, a PostgreSQL table read by the sql
// cursor source, and a core NATS subject. Each run directory gets a
// server (or database) of its own, and the input is fed in chunks while
// the routes run and while they are down, as the file of a follow mode is.
//
// The sql cursor source reads postgres:// and mysql:// only (the runtime
// refuses sqlite:// at start-up, though `mqbc build` accepts it), so the
// table lives in the PostgreSQL server internal/testsrv starts.

const (
	brokerNATS     = "nats"
	brokerNATSCore = "nats-core"
	brokerKafka    = "kafka"
	brokerSQL      = "sql"

	kafkaURLEnv = "SOUNDNESS_KAFKA_URL"
	pgURLEnv    = "SOUNDNESS_PG_URL"
	// kafkaMsgIDHeader is the header the kafka source takes message_id
	// from.
	kafkaMsgIDHeader = "mq_bridge.message_id"
	inSubject        = "in.records"
)

// laterSources is false only in the test that checks they changed no
// other seed.
var laterSources = true

// pickSource chooses, from a stream of its own, whether a case that reads
// the file in consume mode reads one of the later sources instead.
func pickSource(c *Case) {
	if !laterSources || c.Mode != "" || c.Broker != "" {
		return
	}
	r := rand.New(rand.NewPCG(c.Seed, 0x5a1c))
	c.srcRng = rand.New(rand.NewPCG(c.Seed, 0x5a1d))
	switch n := r.IntN(100); {
	case n < 10:
		c.Broker, c.MsgIDs = brokerKafka, r.IntN(2) == 0
		if r.IntN(3) == 0 {
			c.Partitions = 3
		}
	case n < 18:
		c.Broker = brokerSQL
	case n < 24:
		c.Broker, c.MsgIDs = brokerNATSCore, r.IntN(2) == 0
	}
}

// fromBlock is the `from` target of a route of c, or "" for the file.
func (c *Case) fromBlock(route string) string {
	switch c.Broker {
	case brokerNATS:
		return natsFrom(route)
	case brokerNATSCore:
		return fmt.Sprintf("nats { url = \"${env(\\\"%s\\\")}\", subject = %q, no_jetstream = true }", natsURLEnv, inSubject)
	case brokerKafka:
		attrs := fmt.Sprintf("url = \"${env(\\\"%s\\\")}\", topic = \"in\"", kafkaURLEnv)
		if c.srcRng.IntN(4) == 0 {
			// Offsets committed to the broker's group, not the checkpoint.
			// (Rarer: after SIGKILLs the test broker sometimes leaves the
			// group's partitions with a dead member for longer than a run
			// waits, and the case is then inconclusive.)
			attrs += fmt.Sprintf(", group_id = %q", route)
		}
		if c.srcRng.IntN(4) == 0 {
			attrs += ", source_metadata = true"
		}
		return "kafka { " + attrs + " }"
	case brokerSQL:
		from := `table = "src"`
		if c.srcRng.IntN(4) == 0 {
			from = `query = "SELECT * FROM src WHERE n % 5 <> 4"`
		}
		return fmt.Sprintf("sql { url = \"${env(\\\"%s\\\")}\", %s, cursor_column = \"n\", poll_interval = 100ms }", pgURLEnv, from)
	}
	return c.moreFrom(route)
}

// srcHandle is what a run directory's source needs while it runs: the
// environment mqbc gets, how to feed a chunk of input, when the routes
// can receive what is fed, and how to stop the server.
type srcHandle struct {
	env []string
	// feed appends a chunk of the input (nil: the input was all there
	// before the first run).
	feed func(chunk string) error
	// ready reports whether what is fed now reaches the routes (core NATS
	// delivers only to subscribers present at publication); nil: always.
	ready func() bool
	// caughtUp reports whether the routes have consumed everything fed
	// so far, where the sinks standing still does not tell (nil: it
	// does). A Kafka group member killed by SIGKILL holds its partitions
	// until its session (10 s in the runtime) expires, so the run after a
	// kill may consume nothing for that long: the drain waits until every
	// group's committed offsets reach the end of the topic.
	caughtUp func() bool
	// left, when set, counts after a drained run has ended the records
	// still in the source for the routes to read (an AMQP queue's
	// messages, a Redis group's pending and undelivered entries, what an
	// MQTT session holds): a run that left some had not consumed its
	// input, and what its sinks lack is not lost (judgeLeft).
	left func() (int, error)
	// args are added to mqbc run's command line; logLine, when set, is
	// handed every line mqbc logs.
	args    []string
	logLine func(line []byte)
	stop    func()
}

// startSource starts what the case's source needs for one run directory;
// source is the file that runs there.
func startSource(dir string, c *Case, source string) (*srcHandle, error) {
	h, err := startCaseSource(dir, c, source)
	if err != nil {
		return nil, err
	}
	return withObjectStores(dir, source, h)
}

func startCaseSource(dir string, c *Case, source string) (*srcHandle, error) {
	switch c.Broker {
	case "":
		h := &srcHandle{feed: func(chunk string) error { return appendInput(dir, chunk) }, stop: func() {}}
		if c.Mode == "group_subscribe" {
			var routes []string
			for _, m := range routeNameRE.FindAllStringSubmatch(source, -1) {
				routes = append(routes, m[1])
			}
			h.left = fileLeft(dir, routes)
		}
		return h, nil
	case brokerNATS:
		env, stop, err := startNATS(dir, c)
		if err != nil {
			return nil, err
		}
		var durables []string
		for _, m := range routeNameRE.FindAllStringSubmatch(source, -1) {
			durables = append(durables, m[1]) // natsFrom names a route's durable after it
		}
		url := strings.TrimPrefix(env[0], natsURLEnv+"=")
		return &srcHandle{env: env, stop: stop, caughtUp: natsCaughtUp(url, durables), left: natsLeft(url, durables)}, nil
	case brokerNATSCore:
		return startCoreNATS(c, len(coreRE.FindAllString(source, -1)))
	case brokerKafka:
		return startKafka(dir, c, source)
	case brokerSQL:
		return startPGTable(dir)
	}
	if h, err := startMore(dir, c, source); h != nil || err != nil {
		return h, err
	}
	return nil, fmt.Errorf("unknown source %q", c.Broker)
}

// lines splits a chunk into its lines, without the newlines.
func lines(chunk string) []string {
	ls := strings.Split(chunk, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// startCoreNATS starts a NATS server without JetStream; routes subscribe
// to inSubject, and what is published while none listens is gone.
func startCoreNATS(c *Case, routes int) (*srcHandle, error) {
	srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded NATS not ready after 10s")
	}
	url := fmt.Sprintf("nats://%s", srv.Addr().(*net.TCPAddr).String())
	nc, err := nats.Connect(url)
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	var mu sync.Mutex
	line := 0
	h := &srcHandle{env: []string{natsURLEnv + "=" + url}}
	h.feed = func(chunk string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines(chunk) {
			m := nats.NewMsg(inSubject)
			m.Data = []byte(l)
			if c.MsgIDs {
				m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("line-%d", line))
			}
			line++
			if err := nc.PublishMsg(m); err != nil {
				return err
			}
		}
		return nc.Flush()
	}
	h.ready = func() bool {
		sz, err := srv.Subsz(&natsserver.SubszOptions{Test: inSubject, Subscriptions: true, Limit: 1024})
		// The harness's own connection subscribes to nothing.
		return err == nil && sz.Total >= routes
	}
	h.stop = func() { nc.Close(); srv.Shutdown(); srv.WaitForShutdown() }
	return h, nil
}

// startKafka starts a Kafka-protocol broker holding topic "in" and feeds
// it with a producer that waits for every write to be acknowledged.
func startKafka(dir string, c *Case, source string) (*srcHandle, error) {
	parts := max(c.Partitions, 1)
	cl, err := kafkabroker.Start(kafkabroker.Config{Topics: []string{fmt.Sprintf("in:%d", parts)}})
	if err != nil {
		return nil, err
	}
	addrs := cl.ListenAddrs()
	w := &kafka.Writer{Addr: kafka.TCP(addrs...), Topic: "in", Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchSize: 1000, BatchTimeout: time.Millisecond}
	var mu sync.Mutex
	line := 0
	h := &srcHandle{env: []string{kafkaURLEnv + "=" + strings.Join(addrs, ",")}}
	h.feed = func(chunk string) error {
		mu.Lock()
		defer mu.Unlock()
		var msgs []kafka.Message
		for _, l := range lines(chunk) {
			m := kafka.Message{Key: recordKey(l), Value: []byte(l)}
			if c.MsgIDs {
				m.Headers = []kafka.Header{{Key: kafkaMsgIDHeader, Value: fmt.Appendf(nil, "line-%d", line)}}
			}
			line++
			msgs = append(msgs, m)
		}
		if len(msgs) == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A write can fail for some partitions only (a new topic's leader
		// not yet elected, a produce timing out under load): those
		// messages, and only those, are written again, so the topic never
		// holds a record twice. What still fails makes the case
		// inconclusive (runResult.unfed).
		for attempt := 0; ; attempt++ {
			err := w.WriteMessages(ctx, msgs...)
			var werrs kafka.WriteErrors
			if err == nil || !errors.As(err, &werrs) || attempt == 5 {
				return err
			}
			var failed []kafka.Message
			for i, e := range werrs {
				if e != nil {
					failed = append(failed, msgs[i])
				}
			}
			msgs = failed
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
	}
	client := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 5 * time.Second}
	k := kafkaRoutes{dir: dir, client: client, parts: parts}
	for _, m := range groupRE.FindAllStringSubmatch(source, -1) {
		k.groups = append(k.groups, m[1])
	}
	for _, m := range routeNameRE.FindAllStringSubmatch(source, -1) {
		if !slices.Contains(k.groups, m[1]) { // fromBlock names a route's group after it
			k.checkpointed = append(k.checkpointed, m[1])
		}
	}
	if len(k.checkpointed) > 0 {
		if k.metricsAddr, err = freeAddr(); err != nil {
			cl.Close()
			return nil, err
		}
		h.args = []string{"--metrics-addr", k.metricsAddr}
	}
	h.caughtUp, h.left = k.caughtUp, k.left
	h.stop = func() { w.Close(); cl.Close() }
	return h, nil
}

var coreRE = regexp.MustCompile(`no_jetstream\s*=\s*true`)

var groupRE = regexp.MustCompile(`group_id\s*=\s*"([^"]+)"`)

// recordKey is a message's key: the record's id as JSON text, so that
// every copy and revision of one id goes to one partition, in order;
// records without one share the key "-".
func recordKey(line string) []byte {
	var rec map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &rec) == nil && rec["id"] != nil {
		return append([]byte("id:"), rec["id"]...)
	}
	return []byte("-")
}

// The sql source's table: n is the cursor (the line number, so gaps are
// left where a line is not a JSON object), every field of a record a jsonb
// column, so that strings, numbers past 2^53 and missing fields (NULL, a
// JSON null in the row) keep their form.
var pgFields = []string{"id", "seq", "qty", "big", "region", "body", "tag"}

func startPGTable(dir string) (*srcHandle, error) {
	db, drop, err := newPGDatabase()
	if err != nil {
		return nil, err
	}
	url := db.URL
	// The sinks of outbox.go write into this database: their tables are
	// read back from it (dropped with it, by stop).
	serverDBs.Lock()
	if serverDBs.m[dir] == nil {
		serverDBs.m[dir] = map[string]serverDB{}
	}
	serverDBs.m[dir][pgSourcePlaceholder] = serverDB{url: url, driver: "pgx", dsn: db.DSN, drop: func() {}}
	serverDBs.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		drop()
		return nil, err
	}
	ddl := "CREATE TABLE src (n bigint PRIMARY KEY"
	for _, f := range pgFields {
		ddl += ", " + f + " jsonb"
	}
	if _, err := conn.Exec(ctx, ddl+")"); err != nil {
		conn.Close(ctx)
		drop()
		return nil, err
	}
	insert := "INSERT INTO src (n, " + strings.Join(pgFields, ", ") + ") VALUES ($1"
	for i := range pgFields {
		insert += fmt.Sprintf(", $%d::jsonb", i+2)
	}
	insert += ")"
	var mu sync.Mutex
	n := 0
	h := &srcHandle{env: []string{pgURLEnv + "=" + url}}
	h.feed = func(chunk string) error {
		mu.Lock()
		defer mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var b pgx.Batch
		for _, l := range lines(chunk) {
			n++
			d := json.NewDecoder(bytes.NewReader([]byte(l)))
			d.UseNumber()
			var rec map[string]json.RawMessage
			if d.Decode(&rec) != nil || d.More() || rec == nil {
				continue // not a row: the cursor skips its number
			}
			args := []any{n}
			for _, f := range pgFields {
				if v, ok := rec[f]; ok {
					args = append(args, string(v))
				} else {
					args = append(args, nil)
				}
			}
			b.Queue(insert, args...)
		}
		if b.Len() == 0 {
			return nil
		}
		// One transaction per chunk: the cursor never sees a later row
		// committed before an earlier one.
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}
	h.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn.Close(ctx)
		drop()
	}
	return h, nil
}

// The PostgreSQL server of internal/testsrv, shared by every case of the
// process and stopped by stopServers. testsrv's helpers take a testing.TB:
// harnessTB is one whose failures come back as errors.
var pgMu sync.Mutex

func newPGDatabase() (db testsrv.Database, drop func(), err error) {
	pgMu.Lock()
	defer pgMu.Unlock()
	drop, err = withTB("PostgreSQL for the sql source", func(tb *harnessTB) { db = testsrv.SharedPostgres(tb).NewDatabase(tb) })
	return db, drop, err
}

// stopServers stops the shared servers (PostgreSQL) and removes their
// files.
func stopServers() { testsrv.StopAll() }

// harnessTB satisfies testing.TB for testsrv outside a test: Fatal and
// Skip abort with tbAbort (recovered by the caller), Cleanup functions run
// when cleanup is called. Other methods are not used by testsrv's
// PostgreSQL helpers (the embedded nil TB would panic).
type harnessTB struct {
	testing.TB
	name     string // Name's answer, "soundness" when empty
	mu       sync.Mutex
	cleanups []func()
}

type tbAbort struct{ msg string }

func (t *harnessTB) Helper() {}
func (t *harnessTB) Name() string {
	if t.name != "" {
		return t.name
	}
	return "soundness"
}
func (t *harnessTB) Log(args ...any)                   {}
func (t *harnessTB) Logf(format string, args ...any)   {}
func (t *harnessTB) Fatal(args ...any)                 { panic(tbAbort{fmt.Sprint(args...)}) }
func (t *harnessTB) Fatalf(format string, args ...any) { panic(tbAbort{fmt.Sprintf(format, args...)}) }
func (t *harnessTB) Skip(args ...any)                  { panic(tbAbort{fmt.Sprint(args...)}) }
func (t *harnessTB) Skipf(format string, args ...any)  { panic(tbAbort{fmt.Sprintf(format, args...)}) }
func (t *harnessTB) Cleanup(f func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, f)
	t.mu.Unlock()
}

func (t *harnessTB) cleanup() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
