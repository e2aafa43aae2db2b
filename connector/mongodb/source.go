package mongodb

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// mongoSourceConfig is a mongodb source's attributes (stdlib declares
// them; the sink's are mongoSinkConfig).
type mongoSourceConfig struct {
	URL          []plan.Part   `attr:"url"` // rendered by RenderStatic (env() allowed)
	Database     string        `attr:"database"`
	Collection   string        `attr:"collection"`
	Consume      string        `attr:"consume"`
	PollInterval time.Duration `attr:"poll_interval"`
	Format       string        `attr:"format"` // only json
	// CheckpointStore is opened by the engine, which keeps Position there.
	CheckpointStore string `attr:"checkpoint_store"`
}

const (
	consumeAll = "capture_all"
	consumeNew = "capture_new"
	// mongoSourceRetries bounds the failed reads in a row (a dropped
	// connection, a server restarting) tried again after poll_interval.
	mongoSourceRetries = 30
	// mongoPage is the fewest documents one query asks for: a query
	// costs a scan of the collection on some servers (FerretDB), so the
	// source reads ahead of small batches and hands them out from memory.
	mongoPage = 4096
)

func init() {
	runtime.RegisterSource("mongodb", func(b *runtime.BuildEnv, cfg *mongoSourceConfig) (runtime.Source, error) {
		return newMongoSource(b, cfg)
	})
}

// mongoSource captures a collection by polling it in _id order. MongoDB's
// change streams need a replica set, and FerretDB, which the tests run
// against, has none; polling works on every server but sees inserts only.
//
// One cursor serves both phases: with no checkpoint, capture_all reads
// every document from the smallest _id (the snapshot) and then keeps
// asking for `_id > the last one read` (the stream); capture_new starts
// the cursor at the largest _id there is. The position is the _id of the
// last committed document, kept in the checkpoint store with the index of
// the next record and the number of documents at or below the cursor; a
// restart reads on after it, so documents are replayed only from the
// last commit (at-least-once), each with the same message_id, derived
// from the database, the collection and the _id.
//
// A query asks for at least mongoPage documents, handed out to the route
// in batches from memory: on FerretDB every query scans the collection.
// What was read ahead and not committed is read again after a restart.
//
// capture_new's start must survive a crash before any document is
// committed, or a restart would start again after a later _id and skip
// what came in between. So a fresh capture_new first hands the route a
// start mark, a record the engine acks as a duplicate (counted as
// deduplicated, never written), whose position is the start; documents
// are read only once that mark is committed.
//
// Reading `_id > cursor` misses a document only when one is inserted
// behind the cursor or with an _id of another BSON type (a MongoDB
// comparison stays within one type): the plan's increasing_id premise.
// The source checks it rather than trusting it: whenever it has caught up
// with the collection, it counts the documents at or below the cursor and
// stops the route if there are more than it has read (less is a delete),
// and counts the documents whose _id is of another type than the cursor's
// and stops the route if there are any. A delete and an insert behind the cursor
// between two checks cancel out and escape the count; that, and the
// check's cost (two counts per poll once caught up), are the price of a
// source without change streams.
type mongoSource struct {
	route      string
	log        *slog.Logger
	raw        string
	url        string // redacted
	database   string
	collection string
	consume    string
	poll       time.Duration
	idBase     []byte
	premise    string // the armed premise's reason, for errors

	client *mongo.Client
	coll   *mongo.Collection

	// Read state, touched only by Open and Next.
	cursor    bson.RawValue // _id of the last document read (Type 0: none)
	nextSeq   uint64
	behind    int64 // documents at or below the cursor: counted, plus read since
	failures  int
	startSeq  uint64
	startPos  checkpoint.Position
	haveStart bool

	// The start mark of a fresh capture_new: markPending until handed
	// out, then documents wait for markDone (set by Commit).
	markPending bool
	markSeq     uint64
	markWait    bool
	markDone    atomic.Bool

	pending []runtime.Record // read and not handed out yet

	mu  sync.Mutex
	ids []readID // records read and not yet committed past, in Seq order
}

// readID is the cursor a record's commit leaves behind.
type readID struct {
	seq uint64
	id  string // hex of the _id's BSON type and value
}

func newMongoSource(b *runtime.BuildEnv, cfg *mongoSourceConfig) (*mongoSource, error) {
	raw, err := mongoURL(b)
	if err != nil {
		return nil, err
	}
	s := &mongoSource{route: b.Route(), log: b.Logger(), raw: raw, url: plan.RedactURLs(raw),
		database: cfg.Database, collection: cfg.Collection, consume: cfg.Consume, poll: cfg.PollInterval}
	if s.database == "" {
		return nil, b.Errorf("database", "required")
	}
	if s.collection == "" {
		return nil, b.Errorf("collection", "required")
	}
	if s.consume != consumeAll && s.consume != consumeNew {
		return nil, b.Errorf("consume", "%q: want capture_all or capture_new", s.consume)
	}
	if cfg.Format != "json" {
		return nil, b.Errorf("format", "the mongodb source reads documents as JSON only, not %s", cfg.Format)
	}
	if s.poll <= 0 {
		return nil, b.Errorf("poll_interval", "must be positive, got %v", s.poll)
	}
	s.idBase = []byte("mongodb:" + s.database + "." + s.collection + ":")
	return s, nil
}

func (s *mongoSource) Name() string {
	name := strings.ReplaceAll(runtime.SafeName(s.collection), "-", "_")
	if name == "" || len(name) > 40 {
		return "mongodb"
	}
	return name
}

// Replayable is false: a record's index is not tied to its document (a
// delete between two runs renumbers the rest), so part names cannot
// follow it; the compiler refuses name_by = source_position over it.
func (s *mongoSource) Replayable() bool     { return false }
func (s *mongoSource) RecordFormat() string { return "json" }
func (s *mongoSource) SeqGaps() bool        { return false }

func (s *mongoSource) where() string { return s.database + "." + s.collection }

func (s *mongoSource) checkpointSource() string { return "mongodb:" + s.where() }

// ArmPremise takes the increasing_id premise: the source checks it on
// every read whether armed or not; arming gives its errors the reason.
func (s *mongoSource) ArmPremise(p plan.Premise) error {
	if p.Kind != plan.PremiseIncreasingID {
		return fmt.Errorf("the mongodb source cannot check a per-record %s premise", p.Kind)
	}
	s.premise = p.Reason
	return nil
}

// Position is the cursor the last committed record leaves: its _id, the
// next record's index, and how many documents were at or below the _id
// when it was read.
func (s *mongoSource) Position(committed map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	c, ok := committed[0]
	if !ok || c.Next <= s.startSeq {
		if s.haveStart {
			return s.startPos, true
		}
		return checkpoint.Position{Source: s.checkpointSource(), Mode: s.consume + ":"}, true
	}
	last := c.Next - 1
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	for i+1 < len(s.ids) && s.ids[i+1].seq <= last {
		i++
	}
	if len(s.ids) == 0 || s.ids[i].seq != last {
		return checkpoint.Position{}, false // not a record this run read: not expected
	}
	id := s.ids[i].id
	s.ids = s.ids[i:]
	return checkpoint.Position{Source: s.checkpointSource(), Mode: s.consume + ":" + id, NextIndex: c.Next, Offset: c.Offset}, true
}

// Commit lets documents through once capture_new's start mark is durable.
func (s *mongoSource) Commit(_ context.Context, changed map[int32]runtime.AckPos) error {
	if c, ok := changed[0]; ok && s.markWait && c.Next > s.markSeq {
		s.markDone.Store(true)
	}
	return nil
}

func (s *mongoSource) ResumeAt() map[int32]runtime.AckPos {
	return map[int32]runtime.AckPos{0: {Next: s.startSeq, Offset: s.behind}}
}

func (s *mongoSource) errorf(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if s.premise != "" {
		msg += "; the plan's premise increasing_id is broken (" + s.premise + ")"
	}
	return fmt.Errorf("route %s: mongodb source %s: %s", s.route, s.where(), plan.RedactURLs(msg))
}

func (s *mongoSource) Open(ctx context.Context, cp checkpoint.Position, haveCP bool, _ runtime.SourceHost) error {
	client, err := mongoConnect(ctx, s.raw)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("route %s: mongodb source: connect to %s: %s", s.route, s.url, err)
	}
	s.client = client
	s.coll = client.Database(s.database).Collection(s.collection)
	cctx, cancel := context.WithTimeout(ctx, mongoWriteTimeout)
	defer cancel()
	if haveCP && cp.Source == s.checkpointSource() {
		return s.resume(cctx, cp)
	}
	if s.consume == consumeAll {
		s.log.Info("mongodb source: reading the collection from its smallest _id", "collection", s.where())
		return nil
	}
	// capture_new: the cursor starts at the largest _id there is.
	var top bson.Raw
	err = s.coll.FindOne(cctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}}).SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&top)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
	case err != nil:
		return s.errorf("find the largest _id: %v", err)
	default:
		s.cursor = top.Lookup("_id")
		if s.behind, err = s.countBehind(cctx); err != nil {
			return s.errorf("count the documents: %v", err)
		}
	}
	s.markPending, s.markWait, s.markSeq = true, true, 0
	s.log.Info("mongodb source: capturing documents inserted after the largest _id", "collection", s.where(), "after", idText(s.cursor))
	return nil
}

// resume positions the cursor at a checkpoint of this collection, after
// checking that no document was inserted behind it while the route was
// down.
func (s *mongoSource) resume(ctx context.Context, cp checkpoint.Position) error {
	_, idHex, _ := strings.Cut(cp.Mode, ":")
	if idHex != "" {
		id, err := decodeID(idHex)
		if err != nil {
			return s.errorf("checkpoint holds an unreadable _id %q: %v", idHex, err)
		}
		s.cursor = id
		n, err := s.countBehind(ctx)
		if err != nil {
			return s.errorf("count the documents at or below the checkpoint's _id: %v", err)
		}
		if n > cp.Offset {
			return s.errorf("%d document(s) with _id at or below %s, where the last committed document was, appeared while the route was stopped: they would never be read", n-cp.Offset, idText(id))
		}
		s.behind = n
	}
	s.nextSeq, s.startSeq = cp.NextIndex, cp.NextIndex
	s.startPos, s.haveStart = cp, true
	s.log.Info("resuming from checkpoint", "collection", s.where(), "after", idText(s.cursor), "next_index", cp.NextIndex)
	return nil
}

// countBehind counts the documents at or below the cursor.
func (s *mongoSource) countBehind(ctx context.Context) (int64, error) {
	return s.coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: s.cursor}}}})
}

// Next reads the next page of documents after the cursor; once caught up
// it checks the premise and polls every poll_interval.
func (s *mongoSource) Next(ctx context.Context, maxRecords int) (*runtime.Batch, bool, error) {
	for {
		if ctx.Err() != nil {
			return runtime.NewBatch(0), false, nil
		}
		if s.markPending {
			s.markPending = false
			return s.startMark(), false, nil
		}
		if s.markWait && !s.markDone.Load() {
			if !sleepCtx(ctx, min(s.poll, 50*time.Millisecond)) {
				return runtime.NewBatch(0), false, nil
			}
			continue
		}
		if len(s.pending) > 0 {
			return s.handOut(maxRecords), false, nil
		}
		limit := max(maxRecords, mongoPage)
		n, err := s.page(ctx, limit)
		if err == nil && n < limit {
			err = s.checkCaughtUp(ctx)
		}
		var premiseErr *premiseBroken
		switch {
		case errors.As(err, &premiseErr):
			return nil, false, s.errorf("%s", premiseErr.msg)
		case err != nil && ctx.Err() != nil:
			return runtime.NewBatch(0), false, nil
		case err != nil:
			s.failures++
			if s.failures >= mongoSourceRetries {
				return nil, false, s.errorf("read: %v (failed %d times in a row)", err, s.failures)
			}
			s.log.Warn("mongodb source read failed, retrying", "err", plan.RedactURLs(err.Error()), "attempt", s.failures)
		default:
			s.failures = 0
		}
		if len(s.pending) > 0 {
			return s.handOut(maxRecords), false, nil
		}
		if !sleepCtx(ctx, s.poll) {
			return runtime.NewBatch(0), false, nil
		}
	}
}

// handOut returns up to max of the documents read and not handed out.
func (s *mongoSource) handOut(max int) *runtime.Batch {
	n := min(max, len(s.pending))
	b := runtime.NewBatch(n)
	for _, r := range s.pending[:n] {
		b.Add(r)
	}
	s.pending = s.pending[n:]
	if len(s.pending) == 0 {
		s.pending = nil
	}
	return b
}

// startMark is capture_new's start as a record the engine acks without
// writing it.
func (s *mongoSource) startMark() *runtime.Batch {
	b := runtime.NewBatch(1)
	r := runtime.Record{Payload: []byte("{}"), Seq: s.nextSeq, Next: s.behind}
	r.SetMessageID(s.messageID(bson.RawValue{}))
	r.MarkDuplicate()
	b.Add(r)
	s.mu.Lock()
	s.ids = append(s.ids, readID{seq: s.nextSeq, id: encodeID(s.cursor)})
	s.mu.Unlock()
	s.markSeq = s.nextSeq
	s.nextSeq++
	return b
}

// premiseBroken is a read that found the increasing_id premise false.
type premiseBroken struct{ msg string }

func (e *premiseBroken) Error() string { return e.msg }

// page reads up to limit documents after the cursor, in _id order, into
// pending, and says how many.
func (s *mongoSource) page(ctx context.Context, limit int) (int, error) {
	n := 0
	filter := bson.D{}
	if s.cursor.Type != 0 {
		filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: s.cursor}}}}
	}
	qctx, cancel := context.WithTimeout(ctx, mongoWriteTimeout)
	defer cancel()
	cur, err := s.coll.Find(qctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return n, err
	}
	defer cur.Close(context.Background())
	for cur.Next(qctx) {
		doc := cur.Current
		id, err := doc.LookupErr("_id")
		if err != nil {
			return n, &premiseBroken{"a document without _id"}
		}
		if s.cursor.Type != 0 {
			if id.Type != s.cursor.Type {
				return n, &premiseBroken{fmt.Sprintf("document _id %s is a %s, the cursor's a %s", idText(id), id.Type, s.cursor.Type)}
			}
			if less, known := idLess(s.cursor, id); known && !less {
				return n, &premiseBroken{fmt.Sprintf("document _id %s came after %s, which is not smaller: the server did not return documents in increasing _id order", idText(id), idText(s.cursor))}
			}
		}
		s.behind++
		r := runtime.Record{Seq: s.nextSeq, Next: s.behind}
		r.SetMessageID(s.messageID(id))
		if r.Payload, err = bson.MarshalExtJSON(doc, false, false); err != nil {
			// Dead-lettered under its _id, never skipped.
			r.Payload = fmt.Appendf(nil, `{"_id":%q}`, idText(id))
			r.DeadLetter(fmt.Sprintf("mongodb source: document _id %s cannot be written as JSON: %v", idText(id), err))
		}
		s.pending = append(s.pending, r)
		n++
		s.mu.Lock()
		s.ids = append(s.ids, readID{seq: s.nextSeq, id: encodeID(id)})
		s.mu.Unlock()
		s.nextSeq++
		s.cursor = bson.RawValue{Type: id.Type, Value: bytes.Clone(id.Value)}
	}
	return n, cur.Err()
}

// checkCaughtUp checks, once the source has read every document after
// its cursor, that none appeared behind the cursor and none sits out of
// its reach. Each is one count whose answer a concurrent insert after
// the cursor cannot change, so documents streaming in never look like a
// broken premise.
func (s *mongoSource) checkCaughtUp(ctx context.Context) error {
	if s.cursor.Type == 0 {
		return nil // nothing read yet: every _id is after the cursor
	}
	qctx, cancel := context.WithTimeout(ctx, mongoWriteTimeout)
	defer cancel()
	n, err := s.countBehind(qctx)
	if err != nil {
		return err
	}
	if n > s.behind {
		return &premiseBroken{fmt.Sprintf("%d document(s) were inserted with an _id at or below %s after the source had read past it: they would never be read", n-s.behind, idText(s.cursor))}
	}
	s.behind = n // fewer: documents deleted
	// `_id > cursor` compares within the cursor's BSON type only.
	other, err := s.coll.CountDocuments(qctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: int32(s.cursor.Type)}}}}}})
	if err != nil || other == 0 {
		return err
	}
	return &premiseBroken{fmt.Sprintf("%d document(s) have an _id the cursor (%s, a %s) cannot reach: a capture source reads _ids of one BSON type", other, idText(s.cursor), s.cursor.Type)}
}

// messageID is a stable id for (database.collection, _id): a name-based
// UUID of the collection and the _id's BSON type and bytes.
func (s *mongoSource) messageID(id bson.RawValue) uuid.UUID {
	name := append(append(bytes.Clone(s.idBase), byte(id.Type)), id.Value...)
	return uuid.NewSHA1(uuid.NameSpaceOID, name)
}

func (s *mongoSource) Close() error {
	if s.client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.client.Disconnect(ctx)
}

// encodeID is an _id as the checkpoint keeps it: hex of its BSON type byte
// and value; "" for no _id.
func encodeID(id bson.RawValue) string {
	if id.Type == 0 {
		return ""
	}
	return hex.EncodeToString(append([]byte{byte(id.Type)}, id.Value...))
}

// decodeID reverses encodeID, refusing bytes that are not one BSON value.
func decodeID(s string) (bson.RawValue, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) < 1 {
		return bson.RawValue{}, fmt.Errorf("not hex of a BSON value")
	}
	v := bson.RawValue{Type: bson.Type(b[0]), Value: b[1:]}
	if err := v.Validate(); err != nil {
		return bson.RawValue{}, err
	}
	return v, nil
}

// idText shows an _id in messages and logs.
func idText(id bson.RawValue) string {
	switch id.Type {
	case 0:
		return "(none)"
	case bson.TypeInt32, bson.TypeInt64:
		return strconv.FormatInt(id.AsInt64(), 10)
	case bson.TypeString:
		return strconv.Quote(id.StringValue())
	case bson.TypeObjectID:
		return "ObjectId(" + id.ObjectID().Hex() + ")"
	}
	return id.String()
}

// idLess compares two _ids of one type where the order is plain (ObjectId,
// string, 32- and 64-bit integers); known is false for other types.
func idLess(a, b bson.RawValue) (less, known bool) {
	if a.Type != b.Type {
		return false, false
	}
	switch a.Type {
	case bson.TypeObjectID:
		return bytes.Compare(a.Value, b.Value) < 0, true
	case bson.TypeString:
		return a.StringValue() < b.StringValue(), true
	case bson.TypeInt32, bson.TypeInt64:
		return a.AsInt64() < b.AsInt64(), true
	}
	return false, false
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
