package mongodb

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestPremiseMongoUniqueIndex: the decision on listIndexes' answer (the
// end-to-end path needs FerretDB, which is built on first use).
func TestPremiseMongoUniqueIndex(t *testing.T) {
	id := mongoIndex{Name: "_id_", Key: bson.D{{Key: "_id", Value: 1}}}
	byOrder := mongoIndex{Name: "order_1", Key: bson.D{{Key: "order_id", Value: 1}}, Unique: true}
	plain := mongoIndex{Name: "order_1", Key: bson.D{{Key: "order_id", Value: 1}}}
	wide := mongoIndex{Name: "order_region", Key: bson.D{{Key: "order_id", Value: 1}, {Key: "region", Value: 1}}, Unique: true}
	partial := byOrder
	partial.Partial, _ = bson.Marshal(bson.D{{Key: "v", Value: bson.D{{Key: "$gt", Value: 0}}}})
	tests := []struct {
		name string
		idx  []mongoIndex
		cols []string
		ok   bool
	}{
		{"unique on the field", []mongoIndex{id, byOrder}, []string{"order_id"}, true},
		{"only _id", []mongoIndex{id}, []string{"order_id"}, false},
		{"not unique", []mongoIndex{id, plain}, []string{"order_id"}, false},
		{"partial", []mongoIndex{id, partial}, []string{"order_id"}, false},
		{"wider than the key", []mongoIndex{id, wide}, []string{"order_id"}, false},
		{"within the key", []mongoIndex{id, wide}, []string{"region", "order_id"}, true},
	}
	for _, tc := range tests {
		err := mongoUniqueIndexHolds("shop.orders", tc.idx, tc.cols)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
		var f *runtime.PremiseFailure
		if err != nil && (!errors.As(err, &f) || !strings.Contains(f.Fix, "db.orders.createIndex({order_id: 1") || !strings.Contains(f.Found, "shop.orders")) {
			t.Errorf("%s: failure %+v does not name the collection and the fix", tc.name, f)
		}
	}
}

// TestPremiseMongoUniqueIndexServer: a unique-index premise on a field
// other than _id, checked through listIndexes on the real server
// (FerretDB): it holds on a collection with a unique index on the field
// and refuses, naming the collection and the createIndex that fixes it,
// one whose index on the field is not unique or that has none.
func TestPremiseMongoUniqueIndexServer(t *testing.T) {
	db, mdb := mongoDB(t)
	tests := []struct {
		coll  string
		index *mongo.IndexModel
		ok    bool
	}{
		{"with_unique", &mongo.IndexModel{Keys: bson.D{{Key: "order_id", Value: 1}}, Options: options.Index().SetUnique(true)}, true},
		{"with_plain", &mongo.IndexModel{Keys: bson.D{{Key: "order_id", Value: 1}}}, false},
		{"without", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.coll, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := mdb.CreateCollection(ctx, tc.coll); err != nil {
				t.Fatal(err)
			}
			if tc.index != nil {
				if _, err := mdb.Collection(tc.coll).Indexes().CreateOne(ctx, *tc.index); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"order_id": "o-1"}`)
			src := strings.ReplaceAll(fmt.Sprintf(mongoIDFieldSrc, db.DSN, db.Name), `collection = "orders"`, fmt.Sprintf("collection = %q", tc.coll))
			p := plantest.Compile(t, src)
			p.Routes[0].Premises = nil // the compiler's own (on _id, which always holds): this test checks a hand-made one
			p = plantest.WithPremise(t, p, plan.Premise{Kind: plan.PremiseUniqueIndex, When: plan.CheckStartup, Target: db.Name + "." + tc.coll, Columns: []string{"order_id"}})
			opts := runtest.Options()
			opts.BaseDir = dir
			opts.StateDir = filepath.Join(dir, "state")
			res := runtime.Check(context.Background(), p, opts)
			if len(res) != 1 || res[0].OK != tc.ok {
				t.Fatalf("check = %v, want one result, ok %v", res, tc.ok)
			}
			if !tc.ok {
				msg := res[0].Err.Error()
				for _, want := range []string{db.Name + "." + tc.coll, "createIndex({order_id: 1"} {
					if !strings.Contains(msg, want) {
						t.Errorf("refusal %q does not say %q", msg, want)
					}
				}
				st, err := runtime.Run(context.Background(), p, opts)
				if err == nil || st.Route("orders_to_mongo").In != 0 {
					t.Errorf("a route whose premise failed ran: %+v, %v", st, err)
				}
			}
		})
	}
}
