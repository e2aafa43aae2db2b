package runtime

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
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
		var f *premiseFailure
		if err != nil && (!errors.As(err, &f) || !strings.Contains(f.fix, "db.orders.createIndex({order_id: 1") || !strings.Contains(f.found, "shop.orders")) {
			t.Errorf("%s: failure %+v does not name the collection and the fix", tc.name, f)
		}
	}
}
