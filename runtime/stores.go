package runtime

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
	"github.com/mqb-dev/mqb/runtime/dedup"
	"github.com/mqb-dev/mqb/runtime/internal/sqlkv"
)

// dedupStore is where a dedup step keeps its keys: a Pebble directory
// (dedup.Store, one process) or a postgres:// / mysql:// server
// (dedup.SQLStore, shared by every instance of a route).
type dedupStore interface {
	Reserve(keys []string, now time.Time, verdicts []dedup.Verdict) error
	Promote(keys []string, now time.Time, ttl time.Duration) error
	Release(keys []string) error
	// Sync makes every promotion so far durable.
	Sync() error
	Close() error
}

// checkpointStore keeps a route's committed source position: a Pebble
// directory (checkpoint.Store) or a server (checkpoint.SQLStore, fenced:
// Load takes the route over, and Save fails once another instance has).
type checkpointStore interface {
	Load(route string) (checkpoint.Position, bool, error)
	Save(route string, p checkpoint.Position) error
	Close() error
}

// syncedWith reports whether saving a checkpoint to cp also makes d's
// promotions durable (both on one Pebble database, one synced write).
func syncedWith(d dedupStore, cp checkpointStore) bool {
	pd, ok := d.(*dedup.Store)
	if !ok {
		return false
	}
	pc, ok := cp.(*checkpoint.Store)
	// Handles are per reference; the database they share is what counts.
	return ok && pd.Handle().DB == pc.Handle().DB
}

const storeOpenTimeout = 30 * time.Second

// openDedupStore opens a dedup step's store attribute.
func openDedupStore(a nodeAttrs, o *Options) (dedupStore, error) {
	if err := literalStoreURL(a, "store"); err != nil {
		return nil, err
	}
	if url := a.str("store", ""); sqlkv.IsURL(url) {
		ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
		defer cancel()
		st, err := dedup.OpenSQL(ctx, url)
		if err != nil {
			return nil, a.errorf("store", "%s", plan.RedactURLs(err.Error()))
		}
		return st, nil
	}
	dir, err := o.storeDir(a, "store", declaredDefault("dedup", "store", true), "dedup")
	if err != nil {
		return nil, err
	}
	st, err := dedup.Open(dir)
	if err != nil {
		return nil, a.errorf("store", "%v", err)
	}
	return st, nil
}

// openCheckpointStore opens a source's checkpoint_store attribute.
func openCheckpointStore(a nodeAttrs, o *Options) (checkpointStore, error) {
	if err := literalStoreURL(a, "checkpoint_store"); err != nil {
		return nil, err
	}
	if url := a.str("checkpoint_store", ""); sqlkv.IsURL(url) {
		ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
		defer cancel()
		st, err := checkpoint.OpenSQL(ctx, url, instanceOwner())
		if err != nil {
			return nil, a.errorf("checkpoint_store", "%s", plan.RedactURLs(err.Error()))
		}
		return st, nil
	}
	def := declaredDefault(a.node.Kind, "checkpoint_store", false)
	if def == "" {
		def = "pebble://.mqb/state" // a source that declares none (sql) keeps its position where file does
	}
	dir, err := o.storeDir(a, "checkpoint_store", def, "state")
	if err != nil {
		return nil, err
	}
	st, err := checkpoint.Open(dir)
	if err != nil {
		return nil, a.errorf("checkpoint_store", "%v", err)
	}
	return st, nil
}

// literalStoreURL refuses a store url holding ${…}: it would otherwise
// read as unset and the route would quietly keep its state in the default
// Pebble directory instead of the shared server.
func literalStoreURL(a nodeAttrs, attr string) error {
	v, ok := a.value(attr)
	if !ok {
		return nil
	}
	for _, p := range v.Template {
		if p.Expr != "" {
			return a.errorf(attr, "${%s}: a store url is not a template here; write it out", p.Expr)
		}
	}
	return nil
}

// instanceOwner names this process in a shared checkpoint table: host and
// pid for people, a random suffix so a restarted process is a new owner.
func instanceOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
}
