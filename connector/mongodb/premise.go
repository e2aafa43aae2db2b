package mongodb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// The MongoDB sink's premise: the collection has a unique index on fields
// among the premise's columns. _id always has one (id_field writes the key
// there), so a premise on _id holds on every collection.

func (s *mongoSink) PremiseNode() string { return s.node }

// mongoIndex is one index as listIndexes describes it.
type mongoIndex struct {
	Name    string   `bson:"name"`
	Key     bson.D   `bson:"key"`
	Unique  bool     `bson:"unique"`
	Partial bson.Raw `bson:"partialFilterExpression,omitempty"`
}

func (s *mongoSink) CheckPremise(ctx context.Context, p plan.Premise) error {
	if p.Kind != plan.PremiseUniqueIndex {
		return fmt.Errorf("the mongodb sink cannot check a %s premise", p.Kind)
	}
	for _, c := range p.Columns {
		if c == "_id" {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cur, err := s.coll.Indexes().List(ctx)
	if err != nil {
		return fmt.Errorf("list the indexes of %s.%s: %s", s.coll.Database().Name(), s.coll.Name(), plan.RedactURLs(err.Error()))
	}
	var idx []mongoIndex
	if err := cur.All(ctx, &idx); err != nil {
		return fmt.Errorf("list the indexes of %s.%s: %s", s.coll.Database().Name(), s.coll.Name(), plan.RedactURLs(err.Error()))
	}
	return mongoUniqueIndexHolds(s.coll.Database().Name()+"."+s.coll.Name(), idx, p.Columns)
}

// mongoUniqueIndexHolds: some unique, non-partial index has all its fields
// among cols.
func mongoUniqueIndexHolds(coll string, idx []mongoIndex, cols []string) error {
	want := map[string]bool{}
	for _, c := range cols {
		want[c] = true
	}
	var unique []string
	for _, ix := range idx {
		isID := len(ix.Key) == 1 && ix.Key[0].Key == "_id"
		if (!ix.Unique && !isID) || len(ix.Partial) > 0 || len(ix.Key) == 0 {
			continue
		}
		fields := make([]string, len(ix.Key))
		all := true
		for i, e := range ix.Key {
			fields[i] = e.Key
			if !want[e.Key] {
				all = false
			}
		}
		if all {
			return nil
		}
		unique = append(unique, ix.Name+" ("+strings.Join(fields, ", ")+")")
	}
	keys := make([]string, len(cols))
	for i, c := range cols {
		keys[i] = c + ": 1"
	}
	found := fmt.Sprintf("collection %s has no unique index on fields among (%s)", coll, strings.Join(cols, ", "))
	if len(unique) > 0 {
		found += "; its unique indexes are " + strings.Join(unique, ", ")
	}
	_, name, _ := strings.Cut(coll, ".")
	return &runtime.PremiseFailure{
		Found: found + " — a replayed document would be inserted again",
		Fix:   fmt.Sprintf("db.%s.createIndex({%s}, {unique: true}), or set id_field so the key is the _id", name, strings.Join(keys, ", ")),
	}
}

// ArmPremise accepts PremiseKeyPresent: document already dead-letters a
// record whose id_field is missing or null, or whose id_field template
// has a ${…} without a value, so no record is written under a made-up _id.
func (s *mongoSink) ArmPremise(p plan.Premise) error {
	if p.Kind != plan.PremiseKeyPresent {
		return fmt.Errorf("the mongodb sink cannot check a per-record %s premise", p.Kind)
	}
	return nil
}
