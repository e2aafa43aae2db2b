package mongodb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// mongoSinkConfig is a mongodb sink's attributes (stdlib declares them).
type mongoSinkConfig struct {
	// URL may call env(): RenderStatic renders it from the node, naming
	// the attribute in its errors.
	URL           []plan.Part `attr:"url"`
	Database      string      `attr:"database"`
	Collection    string      `attr:"collection"`
	IDField       []plan.Part `attr:"id_field"`
	ReportOutcome bool        `attr:"report_outcome"`
	RequestReply  bool        `attr:"request_reply"` // refused: not supported yet
	Format        string      `attr:"format"`        // only json
}

func init() {
	runtime.RegisterSink("mongodb", func(b *runtime.BuildEnv, cfg *mongoSinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newMongoSink(b, cfg)
		if err != nil {
			return nil, nil, err
		}
		return s, s.programs(), nil
	}, runtime.ChecksPremises(plan.PremiseUniqueIndex), runtime.ArmsPremises(plan.PremiseKeyPresent))
}

// mongoSink inserts each write into one collection with one unordered
// insertMany, every payload (a JSON object) one document. The collection's
// unique _id index absorbs a repeat: with id_field the _id is the record's
// business key, so a replayed record hits a duplicate-key error (11000),
// which counts as success — "existed" — and the route is effectively-once.
// Without id_field the _id is the record's message_id as a UUID (BSON binary
// subtype 4), the form the spec's competing-consumer modes expect: a retry
// of the same records is absorbed, a re-read of a source that mints fresh
// ids is not.
//
// A payload without the id field is dead-lettered, never written under a
// minted _id: that would defeat the deduplication id_field is there for.
//
// A value written in extended JSON, as the mongodb source writes each
// captured document ({"$oid": …}, {"$date": …}), is stored as the BSON
// value it stands for, in _id as in the body (see extJSONKeys): a route
// from one collection to another keyed on id_field "_id" copies each
// document with its types and its ObjectId, the same _id on every replay.
type mongoSink struct {
	route   string
	node    string // plan node ID, for premises
	url     string // redacted, for messages
	client  *mongo.Client
	coll    *mongo.Collection
	idField string            // plain id_field: a top-level payload field
	idTmpl  *runtime.Template // template id_field: rendered to a string
	outcome bool              // report_outcome: meta["mongodb.outcome"]
}

const metaMongoOutcome = "mongodb.outcome"

const (
	mongoConnectTimeout = 10 * time.Second
	mongoWriteTimeout   = 60 * time.Second
	// mongoMaxDocument is MongoDB's maxBsonObjectSize. The server refuses
	// a larger document anyway; checking here fails the record alone and
	// with a reason (FerretDB does not check at all).
	mongoMaxDocument = 16 << 20
	// mongoMaxDepth bounds the nesting of a payload, as encoding/json's
	// decoder does.
	mongoMaxDepth = 1000
)

func newMongoSink(b *runtime.BuildEnv, cfg *mongoSinkConfig) (*mongoSink, error) {
	ctx := b.Context()
	raw, err := mongoURL(b)
	if err != nil {
		return nil, err
	}
	s := &mongoSink{route: b.Route(), node: b.NodeID(), url: plan.RedactURLs(raw), outcome: cfg.ReportOutcome}
	database, collection := cfg.Database, cfg.Collection
	if database == "" {
		return nil, b.Errorf("database", "required")
	}
	if collection == "" {
		return nil, b.Errorf("collection", "required")
	}
	if f := cfg.Format; f != "json" {
		return nil, b.Errorf("format", "format %q is not supported by the mongodb sink yet: a payload must be a JSON object, stored as the document", f)
	}
	if cfg.RequestReply {
		return nil, b.Errorf("request_reply", "not supported by the mongodb sink yet")
	}
	if parts := cfg.IDField; parts != nil {
		static := len(parts) == 1 && parts[0].Expr == ""
		if static {
			s.idField = parts[0].Lit
			if s.idField == "" {
				return nil, b.Errorf("id_field", "empty: name a top-level payload field, or leave id_field out")
			}
		} else if s.idTmpl, err = b.Template("id_field"); err != nil {
			return nil, err
		}
	}
	if s.client, err = mongoConnect(ctx, raw); err != nil {
		return nil, b.Errorf("url", "connect to %s: %s", s.url, err)
	}
	s.coll = s.client.Database(database).Collection(collection)
	idDesc := "message_id (UUID)"
	switch {
	case s.idField != "":
		idDesc = "payload." + s.idField
	case s.idTmpl != nil:
		idDesc = mongoIDText(s.idTmpl.Parts())
	}
	b.Logger().Info("mongodb sink", "url", s.url, "collection", database+"."+collection, "_id", idDesc)
	return s, nil
}

// mongoURL renders the node's url (env() allowed) and refuses one that is
// not mongodb:// or mongodb+srv://.
func mongoURL(b *runtime.BuildEnv) (string, error) {
	raw, err := b.RenderStatic("url")
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(raw, "mongodb://") && !strings.HasPrefix(raw, "mongodb+srv://") {
		return "", b.Errorf("url", "%s: want mongodb://host:27017 or mongodb+srv://host", plan.RedactURLs(raw))
	}
	return raw, nil
}

// mongoConnect connects to the server of raw (a mongodb:// url) and pings
// it, so an unreachable server or wrong credentials fail at start-up, not
// on the first batch. Its errors are redacted.
func mongoConnect(ctx context.Context, raw string) (*mongo.Client, error) {
	opts, err := mongoOptions(raw)
	if err != nil {
		return nil, err
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, errors.New(plan.RedactURLs(err.Error()))
	}
	pctx, cancel := context.WithTimeout(ctx, 2*mongoConnectTimeout)
	defer cancel()
	if err := client.Ping(pctx, nil); err != nil {
		client.Disconnect(context.Background())
		return nil, errors.New(plan.RedactURLs(err.Error()))
	}
	return client, nil
}

// mongoOptions are the client options of raw: the url's, with mqb's
// defaults for what it leaves unset.
func mongoOptions(raw string) (*options.ClientOptions, error) {
	opts := options.Client().ApplyURI(raw)
	// Defaults shorter than the driver's 30 s, unless the url sets them
	// (connectTimeoutMS, serverSelectionTimeoutMS, appName).
	if opts.ConnectTimeout == nil {
		opts.SetConnectTimeout(mongoConnectTimeout)
	}
	if opts.ServerSelectionTimeout == nil {
		opts.SetServerSelectionTimeout(mongoConnectTimeout)
	}
	if opts.AppName == nil {
		opts.SetAppName("mqb")
	}
	if opts.WriteConcern == nil {
		// A write counts as delivered once the server acknowledges it.
		// Left to the server's default write concern (w: 1 before
		// MongoDB 5.0, or wherever a cluster sets it so), a primary
		// answers before the write is in its journal, which it flushes
		// every 100 ms: a crash of the server process loses what it
		// answered in between, and a failover what the primary alone
		// had. Unless the url says otherwise (w, journal), wait for both.
		journal := true
		opts.SetWriteConcern(&writeconcern.WriteConcern{W: writeconcern.WCMajority, Journal: &journal})
	}
	if err := opts.Validate(); err != nil {
		return nil, errors.New(plan.RedactURLs(err.Error()))
	}
	return opts, nil
}

// mongoIDText shows a template as written, for logs.
func mongoIDText(parts []plan.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Expr == "" {
			b.WriteString(p.Lit)
		} else {
			b.WriteString("${" + p.Expr + "}")
		}
	}
	return b.String()
}

func (s *mongoSink) programs() []*runtime.Program {
	if s.idTmpl == nil {
		return nil
	}
	return s.idTmpl.Programs()
}

func (s *mongoSink) Write(ctx context.Context, recs []*runtime.Record) error {
	docs := make([]any, 0, len(recs))
	idx := make([]*runtime.Record, 0, len(recs)) // the record of each document
	for _, r := range recs {
		doc, err := s.document(r)
		if err != nil {
			r.Refuse("mongodb: " + err.Error())
			continue
		}
		docs = append(docs, doc)
		idx = append(idx, r)
	}
	if len(docs) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, mongoWriteTimeout)
	defer cancel()
	_, err := s.coll.InsertMany(wctx, docs, options.InsertMany().SetOrdered(false))
	failed := map[int]string{} // document index → why it was not written
	existed := map[int]bool{}
	if err != nil {
		var bwe mongo.BulkWriteException
		if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
			// Nothing is known per document: the batch failed as a whole
			// (a retry re-inserts it, and what did land is absorbed).
			return s.batchError(err)
		}
		var unsure []int // duplicate keys on an index the error does not name
		for _, we := range bwe.WriteErrors {
			if we.Index < 0 || we.Index >= len(docs) {
				return s.batchError(err)
			}
			switch duplicateOn(we) {
			case dupID:
				existed[we.Index] = true
				continue
			case dupUnknown:
				unsure = append(unsure, we.Index)
				continue
			}
			failed[we.Index] = fmt.Sprintf("mongodb insert: %s (code %d)", plan.RedactURLs(we.Message), we.Code)
		}
		if len(unsure) > 0 {
			found, err := s.storedIDs(wctx, docs, unsure)
			if err != nil {
				return s.batchError(err)
			}
			for _, i := range unsure {
				if found[i] {
					existed[i] = true
				} else {
					failed[i] = "mongodb insert: duplicate key on a unique index other than _id (code 11000)"
				}
			}
		}
	}
	for i, r := range idx {
		if why, ok := failed[i]; ok {
			r.Refuse(why)
			continue
		}
		if s.outcome {
			if existed[i] {
				r.SetMeta(metaMongoOutcome, "existed")
			} else {
				r.SetMeta(metaMongoOutcome, "inserted")
			}
		}
	}
	return nil
}

// dupIndexRE finds the index a MongoDB duplicate-key message names
// ("E11000 duplicate key error collection: db.c index: _id_ dup key: …").
var dupIndexRE = lazyre.New(`index: (\S+) dup key`)

type dupKind uint8

const (
	dupNone    dupKind = iota // not a duplicate key
	dupID                     // on _id: the document is stored already
	dupOther                  // on another unique index: the record fails
	dupUnknown                // the error does not say which index
)

// duplicateOn says which index a write error is a duplicate key on: from
// its keyPattern (MongoDB 4.4+), else the index its message names. A
// duplicate on another unique index is not this record being stored
// already. FerretDB says neither, so its duplicates are dupUnknown.
func duplicateOn(we mongo.BulkWriteError) dupKind {
	if we.Code != 11000 && we.Code != 11001 && we.Code != 12582 {
		return dupNone
	}
	if kp, ok := we.Raw.Lookup("keyPattern").DocumentOK(); ok {
		if elems, err := kp.Elements(); err == nil && len(elems) > 0 {
			if len(elems) == 1 && elems[0].Key() == "_id" {
				return dupID
			}
			return dupOther
		}
	}
	if m := dupIndexRE().FindStringSubmatch(we.Message); m != nil {
		if m[1] == "_id_" {
			return dupID
		}
		return dupOther
	}
	return dupUnknown
}

// storedIDs says which of the documents at idx have their _id in the
// collection, with one query.
func (s *mongoSink) storedIDs(ctx context.Context, docs []any, idx []int) (map[int]bool, error) {
	ids := make(bson.A, 0, len(idx))
	want := map[string][]int{}
	for _, i := range idx {
		v := docs[i].(bson.Raw).Lookup("_id")
		ids = append(ids, v)
		k := idKey(v)
		want[k] = append(want[k], i)
	}
	cur, err := s.coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	found := map[int]bool{}
	for cur.Next(ctx) {
		for _, i := range want[idKey(cur.Current.Lookup("_id"))] {
			found[i] = true
		}
	}
	return found, cur.Err()
}

// idKey identifies an _id value the way the _id index compares it: numbers
// by value whatever their BSON type, anything else by type and bytes.
func idKey(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeInt32:
		return "n" + strconv.FormatInt(int64(v.Int32()), 10)
	case bson.TypeInt64:
		return "n" + strconv.FormatInt(v.Int64(), 10)
	case bson.TypeDouble:
		f := v.Double()
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return "n" + strconv.FormatInt(int64(f), 10)
		}
		return "n" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return string(rune(v.Type)) + string(v.Value)
}

// batchError wraps an error that failed the whole insert; a network
// failure, a timeout or a server that says so is retryable.
func (s *mongoSink) batchError(err error) error {
	e := fmt.Errorf("mongodb insert into %s.%s on %s: %s", s.coll.Database().Name(), s.coll.Name(), s.url, plan.RedactURLs(err.Error()))
	if mongoTransient(err) {
		return runtime.Retryable(e)
	}
	return e
}

// mongoTransient says whether err may pass on retry. A server's answer
// that carries no retry label (auth, an invalid namespace) will not; a
// client-side failure (no server selected, a connection reset, a timeout)
// may.
func mongoTransient(err error) bool {
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) {
		return true
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		if se.HasErrorLabel("RetryableWriteError") || se.HasErrorLabel("TransientTransactionError") {
			return true
		}
		var bwe mongo.BulkWriteException
		if errors.As(err, &bwe) && bwe.WriteConcernError != nil {
			return true
		}
		// Shutdown in progress, not primary, interrupted, host unreachable…
		for _, code := range []int{6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436} {
			if se.HasErrorCode(code) {
				return true
			}
		}
		return false
	}
	return true
}

// document builds r's BSON document: the payload's fields with _id first.
func (s *mongoSink) document(r *runtime.Record) (bson.Raw, error) {
	if err := r.EncodePayload(); err != nil {
		return nil, err
	}
	fields, err := jsonToBSON(r.Payload)
	if err != nil {
		return nil, err
	}
	own := -1 // index of the payload's own _id
	for i, e := range fields {
		if e.Key == "_id" {
			own = i
			break
		}
	}
	var id any
	switch {
	case s.idField != "":
		found := false
		for _, e := range fields {
			if e.Key == s.idField {
				id, found = e.Value, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("payload has no field %s (id_field): not written under a fresh _id, which would defeat deduplication", s.idField)
		}
		if id == nil {
			return nil, fmt.Errorf("payload field %s (id_field) is null: not written, since every null-keyed record would share one _id", s.idField)
		}
		if own >= 0 && s.idField != "_id" {
			return nil, fmt.Errorf("payload has its own _id besides %s (id_field): set id_field = \"_id\" to key the document on it (an extended JSON _id such as {\"$oid\": …} keeps its BSON type), or drop it with map { del payload._id }", s.idField)
		}
	case s.idTmpl != nil:
		v, err := s.idTmpl.Render(r)
		if err != nil {
			return nil, err
		}
		if v == "" {
			return nil, fmt.Errorf("id_field %s renders empty: not written, since every such record would share one _id", mongoIDText(s.idTmpl.Parts()))
		}
		if own >= 0 {
			return nil, fmt.Errorf("payload has its own _id besides id_field %s: drop it with map { del payload._id }, or set id_field = \"_id\" to key the document on it", mongoIDText(s.idTmpl.Parts()))
		}
		id = v
	default:
		if own >= 0 {
			return nil, errors.New("payload has its own _id, and without id_field _id is the message_id: set id_field = \"_id\" to key the document on the payload's (an extended JSON _id such as {\"$oid\": …} keeps its BSON type), or drop it with map { del payload._id }")
		}
		u := r.MessageUUID()
		id = bson.Binary{Subtype: bson.TypeBinaryUUID, Data: u[:]}
	}
	doc := make(bson.D, 0, len(fields)+1)
	doc = append(doc, bson.E{Key: "_id", Value: id})
	for i, e := range fields {
		if i != own {
			doc = append(doc, e)
		}
	}
	b, err := bson.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode the document: %w", err)
	}
	if len(b) > mongoMaxDocument {
		return nil, fmt.Errorf("document is %d bytes, over MongoDB's limit of %d", len(b), mongoMaxDocument)
	}
	return b, nil
}

// jsonToBSON decodes a JSON object into a BSON document, keeping the order
// of its fields and the type of its numbers: an integer stays an integer
// (int64, or decimal128 beyond it), anything else is a double. A value
// written in MongoDB's extended JSON (see extJSONKeys) is the BSON value
// it stands for.
func jsonToBSON(payload []byte) (bson.D, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("payload is not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("payload is not a JSON object: a document needs one")
	}
	p := payloadDecoder{dec: dec, src: payload}
	doc, err := p.object(1)
	if err != nil {
		if e, ok := err.(*extJSONError); ok {
			return nil, e
		}
		return nil, fmt.Errorf("payload is not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("payload is not JSON: data after the object")
	}
	return doc, nil
}

// extJSONKeys are the keys that open a typed value in MongoDB's extended
// JSON, which the mongodb source writes each captured document in (its
// relaxed form): an ObjectId is {"$oid": "…"}, a date {"$date": "…"}, a
// decimal {"$numberDecimal": "…"}. An object of the payload whose first
// key is one of these is read by the driver's extended JSON reader as the
// value it stands for, so a captured document is written back with its
// BSON types, and its _id is the same ObjectId on every replay (the value
// depends on the payload's bytes alone).
//
// Every other object is a document, as it always was: a plain number,
// string or object keeps its mapping. Only an object opened by one of
// these keys reads differently. Written as a document, FerretDB and
// MongoDB before 5.0 refuse it for its '$' key (every MongoDB refuses one
// inside an _id), so there this turns refusals into writes and nothing
// else. MongoDB 5.0 and later accept such a key in the body, storing a
// subdocument that queries reach only through $getField: there a payload
// that was stored so is now stored as the value its extended JSON means,
// the one change to what was written before. An object such a key opens
// that is not a valid value ({"$oid": "zz"}, a key besides "$oid") fails
// the record, naming the field, rather than being written as a string or
// a subdocument.
//
// $scope (only after $code), $regex and $type (legacy forms that the
// driver reads as documents) open no typed value here.
var extJSONKeys = map[string]bool{
	"$oid": true, "$date": true, "$numberInt": true, "$numberLong": true,
	"$numberDouble": true, "$numberDecimal": true, "$binary": true, "$uuid": true,
	"$timestamp": true, "$regularExpression": true, "$dbPointer": true,
	"$symbol": true, "$code": true, "$minKey": true, "$maxKey": true, "$undefined": true,
}

// extJSONError is an extended JSON value of the payload that does not
// read as one; path names the payload field it sits in.
type extJSONError struct {
	path []string // innermost last
	text []byte   // the object as written
	err  error
}

func (e *extJSONError) Error() string {
	text := e.text
	if len(text) > 120 {
		text = append(text[:117:117], "..."...)
	}
	return fmt.Sprintf("payload field %s: %s is not a valid extended JSON value: %v", strings.Join(e.path, "."), text, e.err)
}

// at puts the field or array index the value sits in before the path
// (called on the way out of the decoder, innermost first).
func (e *extJSONError) at(name string) *extJSONError {
	e.path = append([]string{name}, e.path...)
	return e
}

// payloadDecoder reads a payload's JSON tokens; src is the payload, so
// that an extended JSON object can be handed whole to the driver.
type payloadDecoder struct {
	dec *json.Decoder
	src []byte
}

// object reads the fields of an object whose '{' has been read.
func (p payloadDecoder) object(depth int) (bson.D, error) {
	doc := bson.D{}
	for {
		tok, err := p.dec.Token()
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return doc, nil
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected %v", tok)
		}
		v, err := p.member(key, depth)
		if err != nil {
			return nil, err
		}
		doc = append(doc, bson.E{Key: key, Value: v})
	}
}

func (p payloadDecoder) value(tok json.Token, depth int) (any, error) {
	switch x := tok.(type) {
	case json.Delim:
		if depth >= mongoMaxDepth {
			return nil, fmt.Errorf("nested deeper than %d", mongoMaxDepth)
		}
		switch x {
		case '{':
			return p.objectValue(depth + 1)
		case '[':
			arr := bson.A{}
			for {
				t, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				if d, ok := t.(json.Delim); ok && d == ']' {
					return arr, nil
				}
				v, err := p.value(t, depth+1)
				if err != nil {
					if e, ok := err.(*extJSONError); ok {
						return nil, e.at(strconv.Itoa(len(arr)))
					}
					return nil, err
				}
				arr = append(arr, v)
			}
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case json.Number:
		return jsonNumber(x)
	default: // string, bool, nil
		return x, nil
	}
}

// member reads the value of the object's member named key (its name
// read already), an extended JSON error in it naming the key.
func (p payloadDecoder) member(key string, depth int) (any, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	v, err := p.value(tok, depth)
	if e, ok := err.(*extJSONError); ok {
		return nil, e.at(key)
	}
	return v, err
}

// objectValue reads an object whose '{' has been read: a document, or,
// when its first key is one of extJSONKeys, the value it stands for.
func (p payloadDecoder) objectValue(depth int) (any, error) {
	start := p.dec.InputOffset() - 1 // the '{'
	if !p.dec.More() {
		return p.object(depth)
	}
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	key, ok := tok.(string)
	if !ok {
		return nil, fmt.Errorf("unexpected %v", tok)
	}
	if !extJSONKeys[key] {
		// A document after all: its first field, then the rest.
		v, err := p.member(key, depth)
		if err != nil {
			return nil, err
		}
		rest, err := p.object(depth)
		if err != nil {
			return nil, err
		}
		return append(bson.D{{Key: key, Value: v}}, rest...), nil
	}
	// Skip to the object's closing '}' (the JSON is checked on the way),
	// then read the whole object with the driver.
	for open := 1; open > 0; {
		tok, err := p.dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			open++
		case json.Delim('}'), json.Delim(']'):
			open--
		}
	}
	text := p.src[start:p.dec.InputOffset()]
	v, err := extJSONValue(text)
	if err != nil {
		return nil, &extJSONError{text: bytes.Clone(text), err: err}
	}
	return v, nil
}

// extJSONValue reads one extended JSON value (canonical or relaxed) with
// the driver.
func extJSONValue(text []byte) (bson.RawValue, error) {
	wrapped := make([]byte, 0, len(text)+6)
	wrapped = append(append(append(wrapped, `{"v":`...), text...), '}')
	var doc bson.Raw
	if err := bson.UnmarshalExtJSON(wrapped, false, &doc); err != nil {
		return bson.RawValue{}, err
	}
	return doc.Lookup("v"), nil
}

func jsonNumber(n json.Number) (any, error) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if d, err := bson.ParseDecimal128(s); err == nil {
			return d, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %v", s, err)
	}
	return f, nil
}

func (s *mongoSink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), mongoConnectTimeout)
	defer cancel()
	return s.client.Disconnect(ctx)
}
