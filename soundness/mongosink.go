package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// MongoDB sinks. The prover calls a route into a mongodb sink
// effectively-once when its id_field is stable: the key becomes the
// document's _id, and a replayed record hits the unique _id index, which
// the sink counts as absorbed ("existed"). The generator draws, from a
// stream of the case's own (mgs, so a seed that does not draw them keeps
// its routes exactly as before), some of a route's sinks as mongodb sinks
// with
//
//   - id_field a plain payload field ("id", and "seq", unique per line
//     but shared by an exact repeat), a template of stable values
//     ("ord-${payload.id}", "${payload.id}/${payload.region}", the id
//     step's meta["mqb.id"]), a per-delivery template (the clock,
//     message_id: at most at-least-once), or none (the _id is the
//     record's message_id: at-least-once);
//   - report_outcome or not (E043 refuses it without a stable key: now
//     and then drawn anyway), and now and then as the call of a request
//     whose forward switches on meta["mongodb.outcome"] or not, or as a
//     handle step whose outcome the output side's filter reads;
//   - wherever sink() puts a leaf: behind the route's dedup, filter, map
//     and id steps, in a fanout, a switch on a stable value or a
//     request's forward (not in the branches of a switch on a
//     per-delivery value, which are built alike from one stream);
//   - over the mongodb capture source, whose payloads carry the captured
//     document's _id as relaxed extended JSON ({"$oid": "…"}), id_field
//     "_id": the sink refuses an own _id beside any other id_field. Most
//     routes first unwrap it (map payload._id = payload._id["$oid"], a
//     string, the same on every replay); the others keep the object,
//     which the server refuses as an _id (a key starting with $), so
//     every record is dead-lettered, alike in every run. A route whose
//     map replaced the whole payload has no _id left and draws its
//     id_field as over any other source.
//
// Each run directory gets a database of its own on the FerretDB server
// the process shares (the one the mongodb source uses); a generated file
// names it by mongoSinkURL and mongoSinkDB, replaced when the directory
// is prepared. A collection is read back whole: every document as
// relaxed extended JSON, its fields compared one by one. Under a stable
// key the document is the first record of its key that reached the
// collection, and the loss check asks for the _id only; when the route
// can apply a key's records in another order (concurrency > 1, a source
// that redelivers after newer records), which one is kept is not the
// verdict's to say and the documents are compared by _id alone
// (FirstWins). Under a per-delivery key or none, the _id is "*" and the
// documents are a multiset.

const (
	// mongoSinkURL is the url a generated mongodb sink names (the
	// compiler checks a url's scheme, so it is one); mongoSinkDB its
	// database, and the Path of its artifacts.
	mongoSinkURL = "mongodb://mongo-sink:27017"
	mongoSinkDB  = "@MONGOSINK@"
	// mongoAllFields in an Artifact's Mutable stands for every field of
	// a document but _id.
	mongoAllFields = "*"
)

// mongoSinks turns the mongodb sinks on (the -mongo-sinks flag); off, no
// seed draws them.
var mongoSinks bool

// pickMongoSinks gives the case its stream of mongodb sink draws when
// they are on. CI's fixed seeds (1 to 10) stay as they were.
func pickMongoSinks(c *Case) {
	if !mongoSinks || c.Seed <= 10 {
		return
	}
	c.mgs = rand.New(rand.NewPCG(c.Seed, 0x3095))
}

// unwrapMongoID is, for most routes over the mongodb source of a case
// with mongodb sinks, a map that turns the captured document's _id (an
// ObjectID, {"$oid": "…"} in the payload) into its hex string, which a
// mongodb sink with id_field "_id" can write; "" otherwise.
func (g *routeGen) unwrapMongoID() string {
	m := g.c.mgs
	if m == nil || m.IntN(100) >= 75 {
		return ""
	}
	return "map { payload._id = payload._id[\"$oid\"] }\n"
}

// mongoLeaf returns a mongodb sink (or a request calling one) in place of
// the sink sink() would draw, or "".
func (g *routeGen) mongoLeaf(depth int, group string) string {
	m := g.c.mgs
	if m == nil || group != "" || m.IntN(100) >= 45 {
		return ""
	}
	return g.mongoSink(depth, false)
}

// mongoHandler returns, for some handle steps, a mongodb sink as the
// handler (its outcome, when reported, is what an output-side filter
// reads), or "".
func (g *routeGen) mongoHandler() string {
	m := g.c.mgs
	if m == nil || m.IntN(100) >= 35 {
		return ""
	}
	h := g.mongoSink(0, true)
	if strings.Contains(h, "report_outcome") {
		g.outcome = `meta["mongodb.outcome"]`
	}
	return "handle " + h + "\n"
}

// mongoSink is a mongodb sink of a drawn id_field form; not a handler,
// it is now and then the call of a request.
func (g *routeGen) mongoSink(depth int, handler bool) string {
	m := g.c.mgs
	g.c.mongoDrawn = true
	coll := fmt.Sprintf("%s_m%d", g.name, g.next())
	art := Artifact{Kind: "mongo", Path: mongoSinkDB, Table: coll, Group: mongoSinkDB + ":" + coll, Volatile: g.volatileFields()}
	type idForm struct {
		attr     string // the id_field attribute, or "" for none
		volatile bool
	}
	var forms []idForm
	switch r := m.IntN(100); {
	case r < 30:
		forms = []idForm{{`"id"`, g.volatile["id"]}, {`"id"`, g.volatile["id"]}, {`"seq"`, g.volatile["seq"]}}
	case r < 60:
		forms = []idForm{{`"ord-${payload.id}"`, g.volatile["id"]}, {`"${payload.id}/${payload.region}"`, g.volatile["id"] || g.volatile["region"]}}
		if g.idSet {
			forms = append(forms, idForm{`"${meta[\"mqb.id\"]}"`, g.idVolatile}, idForm{`"${meta[\"mqb.id\"]}"`, g.idVolatile})
		}
	case r < 80:
		forms = []idForm{{`"${string(now().UnixNano())}"`, true}, {`"m-${message_id}"`, true}}
	default:
		forms = []idForm{{"", true}}
	}
	id := forms[m.IntN(len(forms))]
	if g.ownID {
		// The captured document's _id, unwrapped or not (see
		// unwrapMongoID): the same on every replay of a record.
		id = idForm{`"_id"`, false}
	}
	report := m.IntN(100) < 35
	if report && id.volatile && m.IntN(100) >= 10 {
		// E043 refuses report_outcome without a stable key: drawn now and
		// then all the same, so the refusal stays reached.
		report = false
	}
	// (A call reports its outcome, so a per-delivery key makes it E043
	// too: only as often as report.)
	asCall := m.IntN(100) < 20 && (!id.volatile || report)
	attrs := []string{fmt.Sprintf("url = %q", mongoSinkURL), fmt.Sprintf("database = %q", mongoSinkDB), fmt.Sprintf("collection = %q", coll)}
	if id.attr != "" {
		attrs = append(attrs, "id_field = "+id.attr)
	}
	if report || asCall {
		attrs = append(attrs, "report_outcome = true")
	}
	if id.volatile {
		art.Volatile = append(art.Volatile, "_id")
	} else {
		// One document per key: the loss check asks for the key, and,
		// when a key's records can reach the collection in another order
		// than they were read, so does the comparison.
		art.Mutable = []string{mongoAllFields}
		art.FirstWins = g.reorders()
	}
	g.arts = append(g.arts, art)
	leaf := "mongodb { " + strings.Join(attrs, ", ") + " }"
	if !asCall || handler {
		return leaf
	}
	var fwd string
	if m.IntN(2) == 0 {
		// A replay reads "existed" for a record its first delivery
		// inserted, and may take the other branch.
		before := len(g.arts)
		fwd = fmt.Sprintf("switch {\non = meta[\"mongodb.outcome\"]\ncase \"inserted\" { to %s }\ndefault { to %s }\n}",
			g.sink(depth+2, ""), g.sink(depth+2, ""))
		for i := before; i < len(g.arts); i++ {
			g.arts[i].AnyBranch = true
		}
	} else {
		fwd = g.sink(depth+1, "")
	}
	return fmt.Sprintf("request {\ncall %s\nforward %s\n}", leaf, fwd)
}

// bigIDRE finds an "id" past int64 in the input's lines.
var bigIDRE = regexp.MustCompile(`"id":(\d{19,})`)

// mongoSafeInput quotes every id of input that int64 cannot hold. The sink
// writes such a number as a decimal128, which FerretDB (the server the
// harness has) cannot store: it drops the connection, and every batch
// holding one fails on every retry. MongoDB stores it; the harness only
// cannot run it. A case that draws a mongodb sink reads the input so
// changed, by every route.
func mongoSafeInput(input string) string {
	return bigIDRE.ReplaceAllStringFunc(input, func(s string) string {
		digits := strings.TrimPrefix(s, `"id":`)
		if _, err := strconv.ParseInt(digits, 10, 64); err == nil {
			return s
		}
		return `"id":"` + digits + `"`
	})
}

// openMongoSinkDB creates run directory dir's database for its mongodb
// sinks and returns source pointing at it.
func openMongoSinkDB(dbs map[string]serverDB, source string) (string, error) {
	if !strings.Contains(source, fmt.Sprintf("%q", mongoSinkDB)) {
		return source, nil
	}
	var db testsrv.Database
	drop, err := withTB("a database for the mongodb sinks", func(tb *harnessTB) {
		tb.name = "sink"
		db = testsrv.MongoDB(tb)
	})
	if err != nil {
		return "", err
	}
	dbs[mongoSinkDB] = serverDB{url: db.Name, driver: "mongodb", dsn: db.DSN, drop: drop}
	source = strings.ReplaceAll(source, fmt.Sprintf("%q", mongoSinkURL), fmt.Sprintf("%q", db.DSN))
	return strings.ReplaceAll(source, fmt.Sprintf("%q", mongoSinkDB), fmt.Sprintf("%q", db.Name)), nil
}

// readMongo reads every document of a mongodb sink's collection in run
// directory dir: each a row of its fields (sorted, each as canonical
// JSON), volatile ones as "*"; mutable ones are left out of the Kept row,
// and of the Full one too under FirstWins.
func readMongo(s Snapshot, dir string, a Artifact) error {
	serverDBs.Lock()
	db, ok := serverDBs.m[dir][a.Path]
	serverDBs.Unlock()
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(db.dsn))
	if err != nil {
		return err
	}
	defer client.Disconnect(context.Background())
	cur, err := client.Database(db.url).Collection(a.Table).Find(ctx, bson.D{})
	if err != nil {
		return err
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		full, kept, err := mongoRow(cur.Current, a)
		if err != nil {
			return err
		}
		s.add(a.Group, full, kept)
	}
	return cur.Err()
}

// mongoRow is a document's Full and Kept rows (see readMongo).
func mongoRow(doc bson.Raw, a Artifact) (full, kept string, err error) {
	ext, err := bson.MarshalExtJSON(doc, false, false)
	if err != nil {
		return "", "", err
	}
	d := json.NewDecoder(bytes.NewReader(ext))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return "", "", fmt.Errorf("document %s: %w", ext, err)
	}
	var fields []string
	for f := range m {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	var fs, ks []string
	for _, f := range fields {
		v := "*"
		if !slices.Contains(a.Volatile, f) {
			b, err := json.Marshal(m[f])
			if err != nil {
				return "", "", err
			}
			v = string(b)
		}
		mutable := slices.Contains(a.Mutable, f) || f != "_id" && slices.Contains(a.Mutable, mongoAllFields)
		if !mutable || !a.FirstWins {
			fs = append(fs, f+"="+v)
		}
		if !mutable {
			ks = append(ks, f+"="+v)
		}
	}
	return strings.Join(fs, " "), strings.Join(ks, " "), nil
}
