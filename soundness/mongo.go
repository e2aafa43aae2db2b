package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// The mongodb capture source: collection "in" of a database of the
// FerretDB server internal/testsrv shares in the process, one database per
// run directory, named for the seed (the url and the database in each run
// directory's routes.mqb are rewritten to it). Each line of the input that is a JSON
// object is one document, inserted by one client in the order of the
// input with an _id of its own that grows with the line number (the
// source's increasing_id premise); a line that is not an object is no
// document and is skipped, as the sql source's table skips it. The _ids
// are the same in every run directory, so a record's payload (the
// document as relaxed extended JSON, _id included) is too. The documents
// are fed in chunks while the routes run and while they are down.
//
// mqbc runs with a metrics address: FerretDB scans the collection for
// every query, so under load a route may read nothing for seconds, and
// sinks that stand still do not tell that it has read everything; a run
// is drained once every route has read every document after where it
// started (its log says where) and committed them (see mongoWatch).
//
// The routes of a case all read with one consume mode, drawn from the
// seed. capture_new reads only what is inserted after a route's start
// mark is committed (its first start); a document inserted before that,
// in one run directory and not in another, would be skipped in one run
// and read in the other: that is the mode's contract, not a loss. So
// while some route of a capture_new file has not committed its start
// mark, what is fed waits in the harness.

const (
	brokerMongo = "mongodb"
	// mongoURLPlaceholder is the url a generated file names; each run
	// directory's routes.mqb gets the server's (the mongodb url takes no
	// env() placeholder).
	mongoURLPlaceholder = "mongodb://127.0.0.1:27017"
	// mongoCollection is the captured collection.
	mongoCollection = "in"
	// mongoBatch is how many documents one insertMany carries.
	mongoBatch = 100
)

// mongoConsume is the consume mode of every route of a case over the
// mongodb source, drawn from a stream of its own.
func mongoConsume(seed uint64) string {
	if rand.New(rand.NewPCG(seed, 0x5a1f)).IntN(3) == 0 {
		return "capture_new"
	}
	return "capture_all"
}

func (c *Case) mongoFrom() string {
	return fmt.Sprintf("mongodb { url = %q, database = %q, collection = %q, consume = %s, poll_interval = 100ms }",
		mongoURLPlaceholder, fmt.Sprintf("sound_%d", c.Seed), mongoCollection, mongoConsume(c.Seed))
}

var (
	// (Only the source's database: a mongodb sink's has been replaced by
	// then, see mongosink.go.)
	databaseRE   = regexp.MustCompile(`database\s*=\s*"sound_\d+"`)
	captureNewRE = regexp.MustCompile(`consume\s*=\s*capture_new`)
	routeNameRE  = regexp.MustCompile(`(?m)^route\s+(\w+)\s*\{`)
)

// startMongoCollection makes a fresh database for dir on the shared
// FerretDB, points dir/routes.mqb at it, and feeds its collection.
func startMongoCollection(dir string, c *Case, source string) (*srcHandle, error) {
	var db testsrv.Database
	drop, err := withTB("FerretDB for the mongodb source", func(tb *harnessTB) {
		tb.name = fmt.Sprintf("sound_%d", c.Seed)
		db = testsrv.MongoDB(tb)
	})
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, "routes.mqb")); err == nil {
		source = string(b) // with the server sinks' placeholders replaced (prepare)
	}
	rewritten := databaseRE.ReplaceAllString(source, fmt.Sprintf("database = %q", db.Name))
	rewritten = strings.ReplaceAll(rewritten, fmt.Sprintf("%q", mongoURLPlaceholder), fmt.Sprintf("%q", db.DSN))
	if err := os.WriteFile(filepath.Join(dir, "routes.mqb"), []byte(rewritten), 0o644); err != nil {
		drop()
		return nil, err
	}
	client, err := mongo.Connect(options.Client().ApplyURI(db.DSN))
	if err != nil {
		drop()
		return nil, err
	}
	coll := client.Database(db.Name).Collection(mongoCollection)
	addr, err := freeAddr()
	if err != nil {
		client.Disconnect(context.Background())
		drop()
		return nil, err
	}
	w := &mongoWatch{addr: addr, captureNew: captureNewRE.MatchString(source)}
	for _, m := range routeNameRE.FindAllStringSubmatch(source, -1) {
		w.routes = append(w.routes, m[1])
	}
	line := 0
	w.insert = func(ctx context.Context, ls []string) error {
		var docs []any
		for _, l := range ls {
			n := line
			line++
			doc, ok := mongoDoc(l, n)
			if !ok {
				continue // not a document: the line is skipped
			}
			docs = append(docs, doc)
		}
		for i := 0; i < len(docs); i += mongoBatch {
			b := docs[i:min(i+mongoBatch, len(docs))]
			if _, err := coll.InsertMany(ctx, b); err != nil {
				return fmt.Errorf("insert into %s.%s: %w", db.Name, mongoCollection, err)
			}
			w.inserted += int64(len(b))
		}
		return nil
	}
	h := &srcHandle{args: []string{"--metrics-addr", addr}, feed: w.feed, caughtUp: w.caughtUp, logLine: w.logLine}
	if w.captureNew {
		h.ready = w.ready
	}
	h.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client.Disconnect(ctx)
		drop()
	}
	return h, nil
}

// mongoDoc is line as a document with the n-th _id, or false when the line
// is not a JSON object. Fields keep their order; an integer that int64
// cannot hold (MongoDB has no wider one, and FerretDB no decimal128) is
// kept as its decimal text.
func mongoDoc(line string, n int) (bson.D, bool) {
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	v, err := bsonValue(d)
	if err != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	doc, ok := v.(bson.D)
	if !ok {
		return nil, false
	}
	return append(bson.D{{Key: "_id", Value: mongoID(n)}}, doc...), true
}

// mongoID is the n-th line's _id: a fixed time and n, so that _ids grow
// with the input and are alike in every run directory.
func mongoID(n int) bson.ObjectID {
	var id bson.ObjectID
	binary.BigEndian.PutUint32(id[0:4], 0x6a000000)
	binary.BigEndian.PutUint32(id[8:12], uint32(n))
	return id
}

// bsonValue reads the next JSON value of d as a BSON one.
func bsonValue(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var doc bson.D
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				key, ok := k.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v", k)
				}
				v, err := bsonValue(d)
				if err != nil {
					return nil, err
				}
				doc = append(doc, bson.E{Key: key, Value: v})
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			if doc == nil {
				doc = bson.D{}
			}
			return doc, nil
		case '[':
			arr := bson.A{}
			for d.More() {
				v, err := bsonValue(d)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i, nil
		}
		if _, err := strconv.ParseUint(string(t), 10, 64); err == nil || !strings.ContainsAny(string(t), ".eE") {
			return string(t), nil
		}
		return t.Float64()
	}
	return tok, nil // string, bool or nil
}

// freeAddr is a free 127.0.0.1 port's address.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// mongoWatch feeds one run directory's collection and follows its routes
// through mqbc's metrics and log. FerretDB scans the collection for every
// query, so under load a route may read nothing for seconds: sinks that
// stand still do not tell that it has read everything, the metrics do.
//
// For capture_new it holds what is fed until every route has committed
// its start mark: seen by the metrics of a run that made the mark, or by
// the log of a later run that resumed from it.
type mongoWatch struct {
	addr       string
	routes     []string
	captureNew bool
	insert     func(ctx context.Context, lines []string) error

	mu sync.Mutex
	// inserted counts the documents in the collection.
	inserted int64
	// from is, per route, the index its current run started reading at
	// (the next_index of the checkpoint it resumed from; 0 from scratch).
	from    map[string]int64
	resumed map[string]bool // routes that resumed from a checkpoint
	open    bool            // what is fed goes in (not capture_new, or the marks are committed)
	backlog []string
	err     error // of the last insert
}

var (
	resumeRE = regexp.MustCompile(`"msg":"resuming from checkpoint"`)
	freshRE  = regexp.MustCompile(`"msg":"mongodb source: (reading the collection from its smallest _id|capturing documents inserted after the largest _id)"`)
	routeRE  = regexp.MustCompile(`"route":"(\w+)"`)
	nextRE   = regexp.MustCompile(`"next_index":(\d+)`)
)

// logLine notes where a route's run starts reading: from scratch, or
// after the checkpoint it resumed from (its start mark, if any, was then
// committed by an earlier run).
func (w *mongoWatch) logLine(line []byte) {
	resume := resumeRE.Match(line)
	if !resume && !freshRE.Match(line) {
		return
	}
	r := routeRE.FindSubmatch(line)
	if r == nil {
		return
	}
	var from int64
	if resume {
		m := nextRE.FindSubmatch(line)
		if m == nil {
			return
		}
		from, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.from == nil {
		w.from, w.resumed = map[string]int64{}, map[string]bool{}
	}
	w.from[string(r[1])] = from
	if resume {
		w.resumed[string(r[1])] = true
	}
}

func (w *mongoWatch) feed(chunk string) error {
	w.mu.Lock()
	w.backlog = append(w.backlog, lines(chunk)...)
	w.mu.Unlock()
	if w.captureNew {
		w.ready()
	} else {
		w.flush()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// flush inserts the backlog once the gate is open (always, for
// capture_all).
func (w *mongoWatch) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if (w.captureNew && !w.open) || len(w.backlog) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if w.err = w.insert(ctx, w.backlog); w.err == nil {
		w.backlog = nil
	}
}

// ready reports whether every route's start mark is committed and what
// was fed is in the collection; it lets the backlog in once the marks are
// committed.
func (w *mongoWatch) ready() bool {
	w.mu.Lock()
	open := w.open
	w.mu.Unlock()
	if !open && w.marksCommitted() {
		// A mark is counted when it is acked and committed at the next
		// tick of the route's committer (every 100 ms): a process that
		// still answers a second later has written it.
		time.Sleep(time.Second)
		if !w.marksCommitted() {
			return false
		}
		w.mu.Lock()
		w.open = true
		w.mu.Unlock()
	}
	w.flush()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.open && len(w.backlog) == 0
}

// caughtUp reports whether everything fed is in the collection and every
// route of the running mqbc has read every document after where it
// started and committed what it read.
func (w *mongoWatch) caughtUp() bool {
	if w.captureNew && !w.ready() {
		return false
	}
	w.flush()
	w.mu.Lock()
	total, from, backlog := w.inserted, maps.Clone(w.from), len(w.backlog)
	w.mu.Unlock()
	if backlog > 0 {
		return false
	}
	if w.captureNew {
		total++ // the start mark is record 0
	}
	body, ok := w.metrics()
	if !ok {
		return false
	}
	for _, r := range w.routes {
		in, ok1 := metricValue(body, "mqb_records_in_total", r)
		lag, ok2 := metricValue(body, "mqb_commit_lag_records", r)
		if !ok1 || !ok2 || int64(in) < total-from[r] || lag != 0 {
			return false
		}
	}
	return true
}

// metrics is the running mqbc's Prometheus text, or false.
func (w *mongoWatch) metrics() ([]byte, bool) { return fetchMetrics(w.addr) }

// fetchMetrics is the Prometheus text mqbc serves at addr, or false.
func fetchMetrics(addr string) ([]byte, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, err == nil && resp.StatusCode == http.StatusOK
}

// marksCommitted reports whether every route has resumed from a
// checkpoint or, in the running mqbc's metrics, acked a deduplicated
// record and left none uncommitted.
func (w *mongoWatch) marksCommitted() bool {
	w.mu.Lock()
	var ask []string
	for _, r := range w.routes {
		if !w.resumed[r] {
			ask = append(ask, r)
		}
	}
	w.mu.Unlock()
	if len(ask) == 0 {
		return true
	}
	body, ok := w.metrics()
	if !ok {
		return false
	}
	for _, r := range ask {
		dedup, ok1 := metricValue(body, "mqb_records_deduplicated_total", r)
		lag, ok2 := metricValue(body, "mqb_commit_lag_records", r)
		if !ok1 || !ok2 || dedup < 1 || lag != 0 {
			return false
		}
	}
	return true
}

// metricValue is the value of name{route="route"} in a Prometheus text
// exposition.
func metricValue(body []byte, name, route string) (float64, bool) {
	prefix := []byte(fmt.Sprintf("%s{route=%q} ", name, route))
	for l := range bytes.SplitSeq(body, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, prefix); ok {
			f, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
			return f, err == nil
		}
	}
	return 0, false
}
