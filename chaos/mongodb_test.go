//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// mongoCaptureSource captures collection src of a FerretDB database:
// each dataset line is one document inserted by one client, whose
// ObjectIds grow (the source's increasing_id premise). A chunk is
// inserted in batches while the run goes, so kills land in the snapshot
// and in the stream.
var mongoCaptureSource = sourceCase{name: "mongodb capture", follows: true, setup: func(t *testing.T, dir string) sourceSetup {
	db := testsrv.MongoDB(t)
	client, err := mongo.Connect(options.Client().ApplyURI(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Disconnect(context.Background()) })
	coll := client.Database(db.Name).Collection("src")
	return sourceSetup{
		from: fmt.Sprintf(`mongodb { url = %q, database = %q, collection = "src", poll_interval = 50ms, checkpoint_store = "pebble://state/mongo" }`, db.DSN, db.Name),
		emit: func(t *testing.T, lines string) {
			rows := parseOrders(t, lines)
			for i := 0; i < len(rows); i += cdcTxRows {
				var docs []any
				for _, o := range rows[i:min(i+cdcTxRows, len(rows))] {
					docs = append(docs, bson.D{{Key: "order_id", Value: o.OrderID}, {Key: "amount", Value: o.Amount}, {Key: "body", Value: o.Body}})
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := coll.InsertMany(ctx, docs)
				cancel()
				if err != nil {
					t.Fatalf("insert %d documents into src: %v", len(docs), err)
				}
			}
		}}
}}
