package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/internal/sqlkv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
	"github.com/mqb-dev/mqb/runtime/dedup"
)

// dedupStore is where a dedup step keeps its keys: a Pebble directory
// (dedup.Store, one process) or a postgres:// / mysql:// server
// (dedup.SQLStore, shared by every instance of a route).
//
// A store is opened in a namespace (see dedupNamespace): it sees only the
// keys of that namespace, so routes sharing a store keep their keys apart.
type dedupStore interface {
	Reserve(keys []string, now time.Time, verdicts []dedup.Verdict) error
	Promote(keys []string, now time.Time, ttl time.Duration) error
	Release(keys []string) error
	// Sync makes every promotion so far durable.
	Sync() error
	Close() error

	// Namespace is the key space the store sees.
	Namespace() string
	// Where names the store for people (a directory, a redacted URL).
	Where() string
	// Count is the number of the namespace's keys remembered at now.
	Count(now time.Time) (int, error)
	// Reset forgets the namespace's keys.
	Reset(now time.Time) (int, error)
	// LegacyKeys counts the keys an mqb before namespaces wrote, which
	// no namespace sees; AdoptLegacy moves them into the store's
	// namespace, DropLegacy deletes them.
	LegacyKeys(now time.Time) (int, error)
	AdoptLegacy(now time.Time) (int, error)
	DropLegacy(now time.Time) (int, error)
	// Owner is the plan file recorded as the namespace's owner; SetOwner
	// records one ("" forgets it). See owner.go.
	Owner() (string, bool, error)
	SetOwner(owner string) error
}

// dedupNamespace is the key space of a route's dedup step: the route's
// own ("route/NAME", and "route/NAME#2" for its second dedup step…) unless
// the step names a namespace to share on purpose ("shared/NAME"), e.g. two
// routes that load the same table from two inputs and must not load a
// record twice between them.
func dedupNamespace(route string, ordinal int, shared string) string {
	if shared != "" {
		return "shared/" + shared
	}
	if ordinal > 1 {
		return fmt.Sprintf("route/%s#%d", route, ordinal)
	}
	return "route/" + route
}

// checkpointStore keeps a route's committed source position: a Pebble
// directory (checkpoint.Store) or a server (checkpoint.SQLStore, fenced:
// Load takes the route over, and Save fails once another instance has).
type checkpointStore interface {
	Load(route string) (checkpoint.Position, bool, error)
	Save(route string, p checkpoint.Position) error
	Close() error
	// Peek reads the position without taking the route over; Delete
	// forgets it; Where names the store for people.
	Peek(route string) (checkpoint.Position, bool, error)
	Delete(route string) error
	Where() string
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

// openDedupStore opens a dedup step's store attribute in namespace ns. A
// store that still holds keys an mqb before namespaces wrote is refused:
// whose they are cannot be told, and guessing either drops another
// route's records or forgets what this one delivered.
func openDedupStore(a nodeAttrs, o *Options, ns string) (dedupStore, error) {
	st, err := openDedupStoreAsIs(a, o, ns)
	if err != nil {
		return nil, err
	}
	if err := refuseLegacyKeys(a, st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// openDedupStoreAsIs opens the store whatever it holds (for mqbc state).
func openDedupStoreAsIs(a nodeAttrs, o *Options, ns string) (st dedupStore, err error) {
	if err := literalStoreURL(a, "store"); err != nil {
		return nil, err
	}
	if url := a.str("store", ""); sqlkv.IsURL(url) {
		ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
		defer cancel()
		sq, err := dedup.OpenSQLNamespace(ctx, url, ns)
		if err != nil {
			return nil, a.errorf("store", "%s", plan.RedactURLs(err.Error()))
		}
		st = sq
	} else {
		dir, err := o.storeDir(a, "store", declaredDefault("dedup", "store", true), "dedup")
		if err != nil {
			return nil, err
		}
		pb, err := dedup.OpenNamespace(dir, ns)
		if err != nil {
			return nil, a.errorf("store", "%v", err)
		}
		st = pb
	}
	return st, nil
}

// refuseLegacyKeys refuses a store that still holds keys an mqb before
// namespaces wrote.
func refuseLegacyKeys(a nodeAttrs, st dedupStore) error {
	n, err := st.LegacyKeys(time.Now())
	if err == nil && n > 0 {
		err = a.errorf("store", "%s holds %d dedup keys written by an mqb that kept one key space for every route; "+
			"which route wrote them cannot be told, so route %s will not guess. Remove that store (the Pebble directory, "+
			"or the rows of the table mqb_dedup) to drop them: records those keys would have dropped within their ttl are then delivered again",
			plan.RedactURLs(st.Where()), n, a.route)
	}
	return err
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
	dir, err := checkpointStoreDir(a, o)
	if err != nil {
		return nil, err
	}
	st, err := checkpoint.Open(dir)
	if err != nil {
		return nil, a.errorf("checkpoint_store", "%v", err)
	}
	return st, nil
}

// checkpointStoreDir is the Pebble directory of a source's checkpoint
// store (its checkpoint_store attribute is not a server URL).
func checkpointStoreDir(a nodeAttrs, o *Options) (string, error) {
	// Every source that keeps a position in a store declares
	// checkpoint_store with its default (TestPositionalSourcesDeclareCheckpointStore).
	// A source whose broker keeps the position declares none, yet a route
	// over it whose proof rests on the process environment keeps that
	// fingerprint here (premise_process.go): in the default state store.
	def := declaredDefault(a.node.Kind, "checkpoint_store", false)
	if def == "" {
		def = defaultStateStore
	}
	return o.storeDir(a, "checkpoint_store", def, "state")
}

// defaultStateStore is where positions and fingerprints are kept when the
// source names no store (the default of the sources that declare one).
const defaultStateStore = "pebble://.mqb/state"

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

// stateLocation describes where host's checkpoint is kept: a Pebble
// directory, or a description of another store.
func stateLocation(host sourceHost) string {
	rt, ok := host.(*route)
	if !ok || rt.cp == nil {
		return "the checkpoint store"
	}
	switch cp := rt.cp.(type) {
	case *checkpoint.Store:
		if dir, err := filepath.Abs(cp.Handle().Dir); err == nil {
			return dir
		}
		return cp.Handle().Dir
	case *checkpoint.SQLStore:
		return "the checkpoint_store server"
	}
	return "the checkpoint store"
}
