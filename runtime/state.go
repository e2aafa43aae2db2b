package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/internal/sqlkv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// A route's state is what lets a rerun go on where the last run stopped:
// its source's checkpoint and the keys its dedup steps remember. `mqbc
// state show` prints it, `mqbc state reset` forgets it, and `mqbc run`
// says where it resumes from. Everything here reads the stores the way
// buildRoute opens them, so it sees the state a run would.

// RouteState is where a route keeps its state and what it holds.
type RouteState struct {
	Route string
	// Plan is the base name of the plan file declaring the route (""
	// for a plan made without one): the owner its state should have.
	Plan string
	// Checkpoint is nil when the source keeps no position of mqb's (a
	// Kafka consumer group, a JetStream durable: the broker keeps it).
	Checkpoint *CheckpointState
	// Dedup has one entry per dedup step, in route order.
	Dedup []DedupState
	// Outputs are the files and part directories the route's file sinks
	// write (not its DLQ), with whether each is gone.
	Outputs []OutputState
}

// CheckpointState is a route's committed source position.
type CheckpointState struct {
	// SourceKind is the source's endpoint kind ("file", "kafka", …).
	SourceKind string
	// Where names the store: a Pebble directory, or a server URL (its
	// password redacted) and table.
	Where string
	// Found is false when the store holds no position for the route (or,
	// for a Pebble store, its directory does not exist).
	Found    bool
	Position checkpoint.Position
	// File and Identity are, for a source that reads files, the path the
	// position is in and which file it was (device, inode, fingerprint;
	// empty for a checkpoint written before file identities).
	File, Identity string
	// detail is what the source's kind says the position is in
	// (DescribesCheckpoint); "" for the source's name.
	detail string
}

// Resumes reports whether a run would start past the source's beginning.
func (c *CheckpointState) Resumes() bool {
	if c == nil || !c.Found {
		return false
	}
	if c.Position.NextIndex > 0 || c.Position.Offset > 0 {
		return true
	}
	for _, off := range c.Position.Partitions {
		if off > 0 {
			return true
		}
	}
	return false
}

// Describe says where the position is, for people: "record 120", or
// each partition's next offset.
func (c *CheckpointState) Describe() string {
	p := c.Position
	if col, ok := strings.CutPrefix(p.Mode, "cursor:"); ok {
		return fmt.Sprintf("cursor %s = %d", col, p.NextIndex) // the next value to read
	}
	if p.Mode == "lsn" {
		return fmt.Sprintf("LSN %X/%X", uint64(p.Offset)>>32, uint32(p.Offset))
	}
	if len(p.Partitions) == 0 {
		return fmt.Sprintf("record %d", p.NextIndex)
	}
	parts := make([]int32, 0, len(p.Partitions))
	for part := range p.Partitions {
		parts = append(parts, part)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	var b strings.Builder
	b.WriteString("next offsets by partition")
	for i, part := range parts {
		sep := ", "
		if i == 0 {
			sep = " "
		}
		fmt.Fprintf(&b, "%s%d:%d", sep, part, p.Partitions[part])
	}
	return b.String()
}

// Detail says what the position is in: what the source's kind describes
// (DescribesCheckpoint: "byte 4410 of /data/in.jsonl" for a file), the
// source's name otherwise.
func (c *CheckpointState) Detail() string {
	if c.detail != "" {
		return c.detail
	}
	return plan.RedactURLs(c.Position.Source)
}

// DedupState is the key space of one dedup step.
type DedupState struct {
	// Namespace is the key space: "route/NAME" (the route's own) or
	// "shared/NAME" (shared on purpose with other routes).
	Namespace string
	Where     string
	// Live is the number of the namespace's keys remembered now; Legacy
	// the keys an mqb before namespaces left in the store, which no
	// namespace sees.
	Live, Legacy int
	// Missing is true when the Pebble directory does not exist.
	Missing bool
	// Owner is the plan file recorded as the namespace's owner ("" when
	// none is: never used, or used before owners were kept).
	Owner string
}

// Shared reports whether other routes may use the namespace too.
func (d DedupState) Shared() bool { return strings.HasPrefix(d.Namespace, "shared/") }

// OutputState is a local file a route's sink writes (a file sink's file
// or part directory, a SQLite database), as the sink's kind lists them
// (ListsOutputs).
type OutputState struct {
	Path string
	// Parts is true for a part directory (name_by = source_position).
	Parts bool
	// Label says what the output is when it is not a file or a part
	// directory ("SQLite database"); "" otherwise.
	Label string
	// Gone is true when the file or directory does not exist, or holds
	// nothing (an empty file, a directory without part files).
	Gone bool
}

// HasState reports whether a rerun of the route would skip anything: its
// checkpoint is past the start, or its dedup steps remember keys.
func (s RouteState) HasState() bool {
	if s.Checkpoint.Resumes() {
		return true
	}
	for _, d := range s.Dedup {
		if d.Live > 0 {
			return true
		}
	}
	return false
}

// RoutesState reads the state of the routes of p named in routes (every
// route when routes is empty); a route whose state cannot be read is left
// out and its error joined into the one returned. It opens each route's stores as a run
// would, without taking a fenced checkpoint over and without creating a
// Pebble directory that does not exist.
func RoutesState(ctx context.Context, p plan.Plan, o Options, routes ...string) ([]RouteState, error) {
	prs, err := pickRoutes(p, routes)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []RouteState
	var errs []error
	for _, pr := range prs {
		rs, err := openRouteStores(ctx, pr, &o)
		if err != nil {
			errs = append(errs, err) // one route's unreadable state hides no other's
			continue
		}
		st, err := rs.state(now)
		rs.close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, st)
	}
	return out, errors.Join(errs...)
}

// ResetRouteState forgets route's state: its checkpoint, and the keys of
// its own dedup namespaces. A namespace shared on purpose with other
// routes is kept (its keys are theirs too); the returned state lists it.
// It returns the state as it was before the reset.
//
// A Pebble store is locked by the process that has it open, so a reset
// while the route runs from a Pebble store fails; a SQL checkpoint
// deleted under a running instance fences it (its next commit fails).
func ResetRouteState(ctx context.Context, p plan.Plan, o Options, route string) (RouteState, error) {
	now := time.Now()
	rs, before, err := openRouteState(ctx, p, o, route, now)
	if rs == nil || err != nil {
		return before, err
	}
	defer rs.close()
	if err := before.OwnedElsewhere(); err != nil {
		return before, fmt.Errorf("%w; to forget that route's state, reset it from its own plan (mqbc state reset %s %s)", err, err.Owner, route)
	}
	if rs.cp != nil {
		if err := rs.cp.Delete(route); err != nil {
			return before, fmt.Errorf("route %s: %s", route, plan.RedactURLs(err.Error()))
		}
	}
	if st := cmp.Or(rs.process, rs.cp); st != nil {
		// A reset reads from the start anew: nothing it delivered is
		// replayed under its old keys (premise_process.go).
		if err := st.Delete(processKey(route)); err != nil {
			return before, fmt.Errorf("route %s: %s", route, plan.RedactURLs(err.Error()))
		}
	}
	for _, d := range rs.dedup {
		if d.st == nil || strings.HasPrefix(d.ns, "shared/") {
			continue
		}
		if _, err := d.st.Reset(now); err != nil {
			return before, fmt.Errorf("route %s: %s", route, plan.RedactURLs(err.Error()))
		}
		if err := d.st.SetOwner(""); err != nil {
			return before, fmt.Errorf("route %s: %s", route, plan.RedactURLs(err.Error()))
		}
	}
	return before, nil
}

// openRouteState opens the stores of p's route named route and reads its
// state at now; on an error the stores are closed (rs is nil when they
// could not be opened).
func openRouteState(ctx context.Context, p plan.Plan, o Options, route string, now time.Time) (*routeStores, RouteState, error) {
	prs, err := pickRoutes(p, []string{route})
	if err != nil {
		return nil, RouteState{}, err
	}
	rs, err := openRouteStores(ctx, prs[0], &o)
	if err != nil {
		return nil, RouteState{}, err
	}
	st, err := rs.state(now)
	if err != nil {
		rs.close()
		return nil, st, err
	}
	return rs, st, nil
}

// pickRoutes returns the routes of p named in names, in plan order, or
// every route when names is empty; an unknown name is an error listing
// the routes there are.
func pickRoutes(p plan.Plan, names []string) ([]*plan.Route, error) {
	var all []string
	for i := range p.Routes {
		all = append(all, p.Routes[i].Name)
	}
	var out []*plan.Route
	for _, n := range names {
		found := false
		for i := range p.Routes {
			if p.Routes[i].Name == n {
				out = append(out, &p.Routes[i])
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no route %s here (routes: %s)", n, strings.Join(all, ", "))
		}
	}
	if len(names) == 0 {
		for i := range p.Routes {
			out = append(out, &p.Routes[i])
		}
	}
	return out, nil
}

// routeStores are a route's opened stores.
type routeStores struct {
	route      string
	plan       string // planFile of the route
	sourceKind string
	cp         checkpointStore // nil: no checkpoint, or its directory is missing
	// process is the store of a route whose broker keeps its position
	// but whose PremiseProcessUnchanged fingerprint mqb keeps.
	process checkpointStore
	hasCP   bool // the source keeps a position of mqb's
	cpWhere string
	dedup   []dedupSlot
	outputs []OutputState
}

type dedupSlot struct {
	ns    string
	where string
	st    dedupStore // nil: the Pebble directory is missing
}

func (rs *routeStores) close() {
	if rs.cp != nil {
		rs.cp.Close()
	}
	if rs.process != nil {
		rs.process.Close()
	}
	for _, d := range rs.dedup {
		if d.st != nil {
			d.st.Close()
		}
	}
}

// openRouteStores opens pr's checkpoint and dedup stores the way
// buildRoute does (the source is built, not opened, to learn whether it
// keeps a position), and lists its file outputs.
func openRouteStores(ctx context.Context, pr *plan.Route, o *Options) (_ *routeStores, err error) {
	if err := ctx.Err(); err != nil { // interrupted: open no more stores
		return nil, err
	}
	rs := &routeStores{route: pr.Name, plan: planFile(pr)}
	defer func() {
		if err != nil {
			rs.close() // what opened before the failure
		}
	}()
	c := &compiler{lookup: o.Env}
	rt := &route{name: pr.Name, log: slog.New(slog.DiscardHandler), now: time.Now}
	if o.Logger != nil {
		rt.log = o.Logger.With("route", pr.Name)
	}
	ordinal := 0
	for i := range pr.Nodes {
		n := &pr.Nodes[i]
		a := nodeAttrs{route: pr.Name, node: n}
		switch {
		case n.Role == plan.RoleSource:
			if err := rs.openCheckpoint(rt, a, c, o, hasPremise(pr, plan.PremiseProcessUnchanged)); err != nil {
				return nil, err
			}
		case n.Role == plan.RoleStep && n.Kind == "dedup":
			ordinal++
			slot, err := openDedupSlot(a, o, dedupNamespace(pr.Name, ordinal, a.str("namespace", "")))
			if err != nil {
				return nil, err
			}
			rs.dedup = append(rs.dedup, slot)
		case n.Role == plan.RoleSink:
			rs.outputs = append(rs.outputs, localOutputs(rt, n, c, o)...)
		}
	}
	return rs, nil
}

// openCheckpoint builds the source (without opening it) to learn whether
// it keeps a position, then opens its checkpoint store.
func (rs *routeStores) openCheckpoint(rt *route, a nodeAttrs, c *compiler, o *Options, process bool) error {
	rs.sourceKind = a.node.Kind
	err := rt.buildSourceEndpoint(a, c, o)
	if rt.src != nil {
		defer rt.src.Close()
	}
	if err != nil {
		return err
	}
	if _, ok := rt.src.Position(nil); !ok {
		if !process {
			return nil // the broker keeps the position
		}
		st, err := openCheckpointStore(a, o)
		if err != nil {
			return err
		}
		rs.process = st
		return nil
	}
	rs.hasCP = true
	if url := a.str("checkpoint_store", ""); !sqlkv.IsURL(url) {
		dir, err := checkpointStoreDir(a, o)
		if err != nil {
			return err
		}
		rs.cpWhere = dir
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return nil // never written: not created by looking
		}
	}
	cp, err := openCheckpointStore(a, o)
	if err != nil {
		return err
	}
	rs.cp, rs.cpWhere = cp, plan.RedactURLs(cp.Where())
	return nil
}

func openDedupSlot(a nodeAttrs, o *Options, ns string) (dedupSlot, error) {
	if url := a.str("store", ""); !sqlkv.IsURL(url) {
		dir, err := o.storeDir(a, "store", declaredDefault("dedup", "store", true), "dedup")
		if err != nil {
			return dedupSlot{}, err
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return dedupSlot{ns: ns, where: dir}, nil
		}
	}
	st, err := openDedupStoreAsIs(a, o, ns)
	if err != nil {
		return dedupSlot{}, err
	}
	return dedupSlot{ns: ns, where: plan.RedactURLs(st.Where()), st: st}, nil
}

// localOutputs lists the local files the sinks under n (a sink, or a
// switch or fanout holding sinks) write, as their kinds' registrations
// list them (ListsOutputs).
func localOutputs(rt *route, n *plan.Node, c *compiler, o *Options) []OutputState {
	var out []OutputState
	if list := registry.sinks[n.Kind].outputs; list != nil {
		out = append(out, list(&buildEnv{ctx: context.Background(), rt: rt, a: nodeAttrs{route: rt.name, node: n}, c: c, o: o})...)
	}
	for i := range n.Children {
		out = append(out, localOutputs(rt, &n.Children[i].Node, c, o)...)
	}
	return out
}

// LocalPath is path resolved against b's BaseDir and made absolute, as
// `mqbc state` shows an output.
func LocalPath(b *BuildEnv, path string) string {
	if !filepath.IsAbs(path) && b.o.BaseDir != "" {
		path = filepath.Join(b.o.BaseDir, path)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return path
}

// OutputGone reports whether a sink's file (or database) is missing or
// empty, or, with parts, its part directory is missing or holds no part
// file.
func OutputGone(path string, parts bool) bool { return outputGone(path, parts) }

// outputGone reports whether a sink's file (or database) is missing or
// empty, or its part directory is missing or holds no part file.
func outputGone(path string, parts bool) bool {
	if !parts {
		info, err := os.Stat(path)
		return err != nil || info.Size() == 0
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return true
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "part-") {
			return false
		}
	}
	return true
}

func (rs *routeStores) state(now time.Time) (RouteState, error) {
	st := RouteState{Route: rs.route, Plan: rs.plan, Outputs: rs.outputs}
	if rs.hasCP {
		cs := &CheckpointState{SourceKind: rs.sourceKind, Where: rs.cpWhere}
		if rs.cp != nil {
			pos, found, err := rs.cp.Peek(rs.route)
			if err != nil {
				return st, fmt.Errorf("route %s: %s", rs.route, plan.RedactURLs(err.Error()))
			}
			cs.Found, cs.Position = found, pos
			if describe := registry.sources[rs.sourceKind].describe; describe != nil {
				d := describe(pos)
				cs.detail, cs.File, cs.Identity = d.Detail, d.File, d.Identity
			}
		}
		st.Checkpoint = cs
	}
	for _, d := range rs.dedup {
		ds := DedupState{Namespace: d.ns, Where: d.where, Missing: d.st == nil}
		if d.st != nil {
			var err error
			if ds.Live, err = d.st.Count(now); err != nil {
				return st, fmt.Errorf("route %s: %s", rs.route, plan.RedactURLs(err.Error()))
			}
			if ds.Legacy, err = d.st.LegacyKeys(now); err != nil {
				return st, fmt.Errorf("route %s: %s", rs.route, plan.RedactURLs(err.Error()))
			}
			if ds.Owner, _, err = d.st.Owner(); err != nil {
				return st, fmt.Errorf("route %s: %s", rs.route, plan.RedactURLs(err.Error()))
			}
		}
		st.Dedup = append(st.Dedup, ds)
	}
	return st, nil
}
