package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqb-dev/mqb/internal/jsonvalue"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
	"github.com/mqb-dev/mqb/runtime/dedup"
	"go.opentelemetry.io/otel/trace"
)

// metaError is the metadata key a dead-lettered record carries its reason in.
const metaError = "mqb.error"

// route is one running pipeline: source → steps → sink, with its DLQ,
// retry policy, ack tracker and checkpoint.
type route struct {
	name   string
	log    *slog.Logger
	health *Health      // nil: nobody asks
	tap    *Tap         // nil: nobody can watch
	tracer trace.Tracer // nil: no spans (see tracing.go)
	// stepNames name rt.steps as tap points: the kind, then kind#2… for
	// a kind's later steps.
	stepNames   []string
	batchSize   int
	concurrency int
	commitEvery time.Duration
	// ackWindow, when set, is how many acked records start a commit
	// before the tick (WindowedSource); sinceCommit counts them, and
	// commitNow wakes the committer.
	ackWindow   int64
	sinceCommit atomic.Int64
	commitNow   chan struct{}
	now         func() time.Time

	src       source
	srcFormat string // how payloads decode: json, text, raw
	cp        checkpointStore
	// processStore keeps the fingerprint of PremiseProcessUnchanged
	// (premise_process.go): cp, or the store the source's
	// checkpoint_store names when the broker keeps the position; nil
	// when the route has no such premise and no checkpoint.
	processStore checkpointStore
	// processFP is the fingerprint this run stored, nil when the route
	// has no PremiseProcessUnchanged.
	processFP map[string]string
	// env resolves env("NAME") as the route's expressions do (Options.Env).
	env         func(string) string
	steps       []step      // input-side steps (and output-side ones when there is no handler)
	turns       []*turnGate // one per dedup step; every read batch passes each once
	readSeq     uint64      // the next batch's seq (the reader's alone)
	outSteps    []recordStep
	dedupStores []dedupStore
	// plan is the base name of the .mqb file declaring the route, which
	// owns its state (owner.go); "" for a plan made without one.
	plan      string
	sink      sink
	sinkProgs []*program
	// absorbedBy is the sink node whose conflict clause stands in for a
	// dedup the compiler elided: the repeats it absorbs count as
	// deduplicated (plan.Elision).
	absorbedBy  string
	retry       retryPolicy
	dlq         sink
	dlqProgs    []*program
	needPayload bool
	// lineSink is the sink, when it takes batches' lines as read;
	// recycles: the route's batches are reused once acked (passthrough.go).
	lineSink LineSink
	recycles bool
	// syncs are the sinks whose writes become durable in the commit
	// (commitsync.go).
	syncs []CommitSyncSink
	// payloadFields, when set, are the only top-level payload fields any
	// expression reads (see payloadNeeds).
	payloadFields map[string]bool
	// slots, when set, number those fields: JSON payloads decode into
	// slots, not maps (slots.go).
	slots *payloadSlots

	acks     *partitionAcks
	commitMu sync.Mutex // one commit at a time: the committer's, or a revoke's
	stats    routeCounters
	metrics  *routeMetrics
	// unmatched are the counts of records the sink's switches without
	// default dropped (BuildEnv.UnmatchedCount).
	unmatched []*UnmatchedCount

	failOnce sync.Once
	failMu   sync.Mutex // failErr, while the route's goroutines run
	failErr  error
	failed   atomic.Bool
	stopRead context.CancelFunc
	// runDone is the run's ctx.Done(): closed once a drain began.
	runDone <-chan struct{}
	// ended is set once a finite source said it has nothing more: a
	// drain before that cut the run short (see RouteStats.Interrupted).
	ended atomic.Bool
}

type routeCounters struct {
	in, out, deduplicated, filtered, deadLettered, errors atomic.Int64
	// added counts the records unnest made beyond the first of each
	// array: in + added = out + deduplicated + filtered + dead-lettered + errors.
	added     atomic.Int64
	committed atomic.Int64
}

// worker holds per-goroutine scratch: a JSON decoder, an expression VM.
type worker struct {
	dec      *jsonvalue.Decoder
	eval     evaluator
	keys     []string
	idx      []int
	verdicts []dedup.Verdict
	ptrs     []*Record
	dead     []*Record
	refs     []ackRef
	spans    []ackSpan
	lines    [][]byte
	mapVals  []any
}

// reservation is a set of keys a dedup step reserved for a batch.
type reservation struct {
	store dedupStore
	ttl   time.Duration
	keys  []string
	// recs holds, for each key, the index in the batch of the record that
	// reserved it: a record that is not delivered gives its key back.
	recs []int
}

func (rt *route) close() error {
	var errs []error
	if rt.src != nil {
		errs = append(errs, rt.src.Close())
	}
	if rt.sink != nil {
		errs = append(errs, rt.sink.Close())
	}
	if rt.dlq != nil {
		errs = append(errs, rt.dlq.Close())
	}
	for _, d := range rt.dedupStores {
		errs = append(errs, d.Close())
	}
	if rt.cp != nil {
		errs = append(errs, rt.cp.Close())
	} else if rt.processStore != nil {
		errs = append(errs, rt.processStore.Close())
	}
	return errors.Join(errs...)
}

// stopping reports whether the route is draining or has failed.
func (rt *route) stopping() bool {
	if rt.failed.Load() {
		return true
	}
	select {
	case <-rt.runDone:
		return true
	default:
		return false
	}
}

// fail stops the route after a failure nothing can absorb: reading stops,
// the failed batch is never acked, and what was acked before is committed.
//
// Sink workers fail concurrently: when each lost records, the error kept
// names the earliest of them, where the position stopped and the rerun
// resumes, and counts them all.
func (rt *route) fail(err error) {
	first := false
	rt.failOnce.Do(func() {
		first = true
		rt.failMu.Lock()
		rt.failErr = err
		rt.failMu.Unlock()
		rt.failed.Store(true)
		for _, g := range rt.turns {
			g.release()
		}
		rt.log.Error("route failed", "err", err)
		if rt.stopRead != nil {
			rt.stopRead()
		}
	})
	if !first {
		rt.failMu.Lock()
		rt.failErr = joinLost(rt.failErr, err)
		rt.failMu.Unlock()
	}
}

// joinLost is the error of a route that failed with cur and then with
// next: when both lost records, one error naming the earlier first record
// and counting both; else cur.
func joinLost(cur, next error) error {
	a, ok1 := cur.(*lostRecordsError)
	b, ok2 := next.(*lostRecordsError)
	if !ok1 || !ok2 {
		return cur
	}
	j := *a
	if b.partition < a.partition || b.partition == a.partition && b.seq < a.seq {
		j = *b
	}
	j.count = a.count + b.count
	return &j
}

// run executes the route until its source ends (consume mode at EOF, all
// records committed) or ctx is cancelled (graceful drain: in-flight batches
// finish and are committed).
func (rt *route) run(ctx context.Context) error {
	var cp checkpoint.Position
	var haveCP bool
	if rt.cp != nil { // nil: the source's broker keeps its position
		var err error
		if cp, haveCP, err = rt.cp.Load(rt.name); err != nil {
			return err
		}
		if err := rt.claimCheckpoint(cp, haveCP); err != nil {
			return err
		}
	}
	rt.acks = newPartitionAcks(rt.src.SeqGaps())
	rt.runDone = ctx.Done()
	rt.blocksPassThrough()
	if err := rt.src.Open(ctx, cp, haveCP, rt); err != nil {
		if ctx.Err() != nil {
			// A drain (SIGTERM) while the source was still opening, e.g.
			// asking a broker for metadata: nothing was read, nothing is
			// lost, and the run ends cleanly rather than with the
			// cancelled request's error.
			return nil
		}
		return err
	}
	if ctx.Err() != nil { // cancelled while waiting for the source to open
		return nil
	}
	if rs, ok := rt.src.(resumingSource); ok {
		for part, pos := range rs.ResumeAt() {
			rt.acks.start(part, 0, pos.Next, pos.Offset)
		}
	}
	rt.storeCommitted()
	rt.health.set(rt.name, "ready", "")

	readCtx, stopRead := context.WithCancel(ctx)
	rt.stopRead = stopRead
	defer stopRead()

	// Bounded queues between the stages: the reader runs at most a few
	// batches ahead of processing, and processing at most groupSize batches
	// ahead of the sink, which takes them in groups.
	procCh := make(chan *batch, 2*rt.concurrency)
	sinkCh := make(chan *batch, rt.groupSize())
	var wg sync.WaitGroup

	// Reader: the only goroutine touching the source.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(procCh)
		for {
			t0 := time.Now()
			b, eof, err := rt.src.Next(readCtx, rt.batchSize)
			if err != nil {
				rt.fail(err)
				return
			}
			if b.count() > 0 {
				if err := rt.acks.track(b); err != nil {
					rt.fail(fmt.Errorf("route %s: %w", rt.name, err))
					return
				}
				b.seq = rt.readSeq
				rt.readSeq++
				rt.startBatchSpan(b, t0)
				n := int64(b.count())
				rt.stats.in.Add(n)
				rt.metrics.in.Add(float64(n))
				// Always hand a read batch on, even when draining: the
				// workers consume until procCh closes, so this cannot block
				// forever, and a drain finishes what was read.
				procCh <- b
			}
			if eof {
				rt.ended.Store(true)
				return
			}
			if readCtx.Err() != nil {
				return
			}
		}
	}()

	// Processing workers: decode, input/output steps.
	var procWG sync.WaitGroup
	for range rt.concurrency {
		procWG.Add(1)
		go func() {
			defer procWG.Done()
			w := &worker{dec: jsonvalue.NewDecoder()}
			for b := range procCh {
				if rt.failed.Load() {
					rt.passTurns(b)
					endBatchSpans([]*batch{b}, errRouteFailed)
					continue
				}
				endSteps := rt.stageSpan(b, "mqb.steps")
				err := rt.process(w, b)
				endSteps(err)
				rt.passTurns(b)
				if err != nil {
					endBatchSpans([]*batch{b}, err)
					rt.releaseAll([]*batch{b})
					rt.fail(err)
					continue
				}
				sinkCh <- b
			}
		}()
	}
	go func() { procWG.Wait(); close(sinkCh) }()

	// Sink workers: write, dead-letter, promote dedup keys, ack.
	var sinkWG sync.WaitGroup
	for range rt.concurrency {
		sinkWG.Add(1)
		go func() {
			defer sinkWG.Done()
			w := &worker{}
			var group []*batch
			for b := range sinkCh {
				group = append(group[:0], b)
			more:
				for len(group) < rt.groupSize() {
					select {
					case b2, ok := <-sinkCh:
						if !ok {
							break more
						}
						group = append(group, b2)
					default:
						break more
					}
				}
				if rt.failed.Load() {
					rt.releaseAll(group)
					continue
				}
				if err := rt.deliver(w, group); err != nil {
					endBatchSpans(group, err)
					rt.releaseAll(group)
					rt.fail(err)
				} else if rt.recycles {
					recycle(group)
				}
			}
		}()
	}

	// Committer: moves the checkpoint to the contiguous acked position.
	done := make(chan struct{})
	commitErr := make(chan error, 1)
	go func() {
		t := time.NewTicker(rt.commitEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if err := rt.commit(); err != nil {
					rt.fail(err)
				}
			case <-rt.commitNow: // nil unless the source has an ack window
				if err := rt.commit(); err != nil {
					rt.fail(err)
				}
			case <-done:
				commitErr <- rt.commit()
				return
			}
		}
	}()

	wg.Wait()
	sinkWG.Wait()
	close(done)
	if err := <-commitErr; err != nil && rt.failErr == nil {
		rt.failErr = err
	}
	if n := rt.acks.pending(nil); rt.failErr == nil && n > 0 && ctx.Err() == nil {
		rt.failErr = fmt.Errorf("route %s: %d records read but never acknowledged", rt.name, n)
	}
	if rt.failErr == nil && rt.acks.pending(nil) == 0 {
		// Every record read is committed: none will be read again, so
		// what the process read no longer binds the next run.
		rt.failErr = rt.forgetProcess()
	}
	return rt.failErr
}

// passTurns marks b as through every dedup step's gate, whether its steps
// ran, stopped early (every record filtered or dead) or failed, so the next
// batch is not kept waiting for it.
func (rt *route) passTurns(b *batch) {
	for _, g := range rt.turns {
		g.pass(b.seq)
	}
}

// process runs the route's steps over b.
func (rt *route) process(w *worker, b *batch) error {
	// A text or raw payload nothing reads needs no decoding: it would
	// only be copied into a string.
	switch {
	case rt.slots != nil:
		rt.slots.decode(w, b)
	case rt.needPayload || rt.srcFormat == "json":
		rt.decode(w, b)
	}
	tapped := rt.tap.watching()
	if tapped {
		rt.tap.sendBatch(rt.name, "source", b)
	}
	for i, s := range rt.steps {
		if err := s.apply(w, b); err != nil {
			return fmt.Errorf("route %s: %w", rt.name, err)
		}
		if tapped && i < len(rt.stepNames) {
			rt.tap.sendBatch(rt.name, rt.stepNames[i], b)
		}
	}
	// Records that go no further are acked now, straight back to the
	// source, unless the batch holds dedup keys: then deliver acks them
	// after promoting the keys. A record a step behind the dedup drops (a
	// filter, a second dedup) still holds the key it reserved, in memory
	// only; acked here, a commit could pass its position before the key
	// was promoted and synced, and after a crash (or a failure that
	// releases the key) nothing would remember it: a later repeat of the
	// key would pass as new (soundness case seed-17352).
	if len(b.reserved) > 0 {
		return nil
	}
	refs := w.refs[:0]
	for i := range b.recs {
		if st := b.recs[i].state; st == stFiltered || st == stDuplicate {
			refs = append(refs, refOf(&b.recs[i]))
		}
	}
	w.refs = refs
	return rt.acks.ack(refs)
}

// decode gives b's live records their decoded payloads (JSON is checked
// when nothing reads it); a record that does not decode is dead.
func (rt *route) decode(w *worker, b *batch) {
	for i := range b.recs {
		r := &b.recs[i]
		if r.state != stLive {
			continue
		}
		switch rt.srcFormat {
		case "json":
			if rt.needPayload {
				var v any
				var err error
				if rt.payloadFields != nil {
					v, err = w.dec.DecodeFields(r.Payload, rt.payloadFields)
				} else {
					v, err = w.dec.Decode(r.Payload)
				}
				if err != nil {
					r.kill(err.Error())
					continue
				}
				r.value = v
			} else if err := w.dec.Valid(r.Payload); err != nil {
				r.kill(err.Error())
			}
		default:
			r.value = string(r.Payload)
		}
	}
}

// groupSize is how many ready batches a sink worker takes at once. Waiting
// on durability (an fsync costs ~10 ms on the build machine) dominates a
// fast route; batches that queue up meanwhile share the next write and its
// fsync or transaction (group commit). Each batch is still acked only once
// the write that holds it is durable. The queue in front of the sink holds
// as many batches, so it is smaller when records carry decoded payloads
// (several times their size in memory) than when they are bare lines.
//
// A route handing its sink lines as read (passthrough.go) takes 6: its
// groups of 6 batches still share one fsync per 6k lines, and the peak
// anonymous memory of a 1M-line file → file route falls from ~24 to
// ~16 MiB (/proc's RssAnon) with no measurable loss in rate.
//
// When that sink also leaves its fsync to the commit (commitsync.go), a
// write only hands the lines to the kernel and nothing waits on the disk:
// groups of 2 batches keep the writes large while half as many batches
// are in flight.
//
// A sink that leaves its commit to the route's and is not a line sink (sql
// with bulk_copy: one COPY per write into a transaction committed at the
// route's commit) pays a per-statement cost on its server that no longer
// hides behind a commit per write: it takes groups of 16 even with decoded
// payloads. On a 1M-record file → PostgreSQL bulk_copy route (go run
// ./bench/compare -only postgres-copy) the server's CPU fell from ~1.2 to
// ~0.75 s and the rate against psql's \copy rose from 0.32× to 0.66×, for
// a peak RSS of 99 MiB instead of 71.
//
// A sink that says how many records it wants in a write (WriteSizer) gets
// groups of about that many.
func (rt *route) groupSize() int {
	if ws, ok := rt.sink.(WriteSizer); ok && rt.batchSize > 0 {
		return min(max((ws.WriteSize()+rt.batchSize-1)/rt.batchSize, 1), 16)
	}
	_, lines := rt.sink.(LineSink)
	switch {
	case rt.needPayload && !lines && rt.syncsOnCommit(rt.sink):
		return 16
	case rt.needPayload:
		return 4
	case rt.lineSink != nil && rt.syncsOnCommit(rt.lineSink):
		return 2
	case rt.lineSink != nil:
		return 6
	}
	return 16
}

// deliver writes the live records of a group of batches to the sink and
// the dead ones to the DLQ, then promotes dedup keys and acks every record.
func (rt *route) deliver(w *worker, group []*batch) error {
	ctx := context.Background() // a drain finishes the batch whatever happens to the run's ctx
	// Records already dead before the sink (bad JSON, no identity…) go to
	// the DLQ while the sink writes: both wait on their own durability.
	live, early := w.ptrs[:0], w.dead[:0]
	for _, b := range group {
		for i := range b.recs {
			switch b.recs[i].state {
			case stLive:
				live = append(live, &b.recs[i])
			case stDead:
				early = append(early, &b.recs[i])
			}
		}
	}
	w.ptrs, w.dead = live, early
	// A group with none (every group of a route moving blocks of lines)
	// starts no goroutine: one per group, and the thread it may wake,
	// cost system CPU for nothing.
	var earlyDone chan error
	if len(early) > 0 {
		earlyDone = make(chan error, 1)
		go func() {
			endDLQ := rt.groupSpan(group, "mqb.dlq.write", len(early))
			err := rt.deadLetter(ctx, early)
			endDLQ(err)
			earlyDone <- err
		}()
	}

	flushMetaFor(rt.sink, live) // metaid.go
	if rt.tap.watching() {
		rt.tap.send(rt.name, "sink", live)
	}
	endWrite := rt.groupSpan(group, "mqb.sink.write", len(live))
	onRetry := func(err error) {
		rt.log.Warn("sink write failed, retrying", append([]any{"err", err}, traceAttrs(group[0])...)...)
	}
	var sinkErr error
	if lines, ok := rt.linesOf(w, group); ok {
		sinkErr = rt.retry.do(live, func() error { return rt.lineSink.WriteLines(ctx, lines) }, onRetry)
	} else if blocks := slices.ContainsFunc(group, func(b *batch) bool { return b.blockLines > 0 }); blocks {
		// Cannot happen on a route that passes blocks (no step changes a
		// record); were it to, the block's lines must not go unwritten.
		sinkErr = fmt.Errorf("a block of lines with records that cannot be written as read")
	} else {
		sinkErr = rt.retry.write(ctx, rt.sink, live, onRetry)
	}
	endWrite(sinkErr)
	if earlyDone != nil {
		if err := <-earlyDone; err != nil {
			return err
		}
	}
	if sinkErr != nil {
		return fmt.Errorf("route %s: sink: %w", rt.name, sinkErr)
	}
	var out, filtered, dups int64
	if ac, ok := rt.sink.(AbsorbCounter); ok && rt.absorbedBy != "" {
		n := ac.TakeAbsorbed()
		out, dups = -n, n
	}
	var late []*Record
	var added int64
	for _, b := range group {
		out += int64(b.blockLines) // a block's lines are all written
		for i := range b.recs {
			r := &b.recs[i]
			if r.kid > 0 {
				added++ // an element after its array's first (unnest)
			}
			switch r.state {
			case stLive:
				if r.sinkErr != "" {
					r.kill(r.sinkErr)
					late = append(late, r)
				} else {
					out++
				}
			case stFiltered:
				filtered++
			case stDuplicate:
				dups++
			}
		}
	}
	if err := rt.deadLetter(ctx, late); err != nil {
		return err
	}
	rt.reply(group) // reply.go: the delivered records' replies, before any is acked
	var dlqd int64
	var lost []*Record // failed with nowhere to go: never acked
	for _, dead := range [][]*Record{early, late} {
		for _, r := range dead {
			if rt.undelivered(r) {
				lost = append(lost, r)
			} else {
				dlqd++
			}
		}
	}
	refs := w.refs[:0]
	for _, b := range group {
		for _, res := range b.reserved {
			promote, release := res.keys, []string(nil)
			if len(lost) > 0 {
				promote = nil
				for j, k := range res.keys {
					if rt.undelivered(&b.recs[res.recs[j]]) {
						release = append(release, k)
					} else {
						promote = append(promote, k)
					}
				}
			}
			// A key whose record was not delivered is given back: kept, it
			// would make the rerun drop that record as a duplicate.
			if len(release) > 0 {
				if err := res.store.Release(release); err != nil {
					return fmt.Errorf("route %s: %w", rt.name, err)
				}
			}
			if len(promote) > 0 {
				if err := res.store.Promote(promote, rt.now(), res.ttl); err != nil {
					return fmt.Errorf("route %s: %w", rt.name, err)
				}
			}
		}
		b.reserved = nil
		if len(lost) == 0 {
			continue // every record of the group is acked, run by run, below
		}
		for i := range b.recs {
			if r := &b.recs[i]; !rt.undelivered(r) {
				refs = append(refs, refOf(r))
			}
		}
	}
	w.refs = refs
	if err := rt.ackGroup(w, group, lost, refs); err != nil {
		return fmt.Errorf("route %s: %w", rt.name, err)
	}
	errs := int64(len(lost))
	rt.stats.out.Add(out)
	rt.stats.filtered.Add(filtered)
	rt.stats.deduplicated.Add(dups)
	rt.stats.deadLettered.Add(dlqd)
	rt.stats.errors.Add(errs)
	rt.stats.added.Add(added)
	rt.metrics.add(out, filtered, dups, dlqd, errs)
	rt.metrics.added.Add(float64(added))
	if len(lost) > 0 {
		return rt.lostError(lost)
	}
	endBatchSpans(group, nil)
	return nil
}

// linesOf returns the lines of group for the route's line sink, when it
// has one and the group can go as read (see groupLines).
func (rt *route) linesOf(w *worker, group []*batch) ([][]byte, bool) {
	if rt.lineSink == nil {
		return nil, false
	}
	lines, ok := groupLines(group, w.lines)
	w.lines = lines
	return lines, ok
}

// ackGroup acks a delivered group: with no record lost, every record the
// group's batches read, one step per run of positions (an unnest's parts
// included: they are all in their batch); else the records refs names,
// one by one, so the commit stops before the first lost one.
func (rt *route) ackGroup(w *worker, group []*batch, lost []*Record, refs []ackRef) error {
	defer rt.nudgeCommit(group)
	if len(lost) > 0 {
		return rt.acks.ack(refs)
	}
	spans := w.spans[:0]
	for _, b := range group {
		spans = append(spans, b.spans...)
	}
	w.spans = spans
	return rt.acks.ackSpans(spans)
}

// nudgeCommit wakes the committer once the records acked since the last
// commit reach rt.ackWindow, half the source's ack window
// (WindowedSource): the broker hands the route no more than the window
// until they are committed, so waiting for the tick would leave the route
// idle.
func (rt *route) nudgeCommit(group []*batch) {
	if rt.ackWindow == 0 {
		return
	}
	var n int64
	for _, b := range group {
		n += int64(len(b.recs))
	}
	if rt.sinceCommit.Add(n) < rt.ackWindow {
		return
	}
	select {
	case rt.commitNow <- struct{}{}:
	default: // a commit is asked for already
	}
}

// undelivered reports whether a record failed with nowhere to go: dead,
// with no DLQ declared or refused by the DLQ.
func (rt *route) undelivered(r *Record) bool {
	return r.state == stDead && (rt.dlq == nil || r.sinkErr != "")
}

// lostError logs the records that failed with nowhere to go and returns
// the error that stops the route. Their positions are never acked, so the
// checkpoint stays before the first of them and a rerun reads it again.
func (rt *route) lostError(lost []*Record) error {
	slices.SortFunc(lost, func(a, b *Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Seq, b.Seq))
	})
	const shown = 5
	for i, r := range lost {
		if i == shown {
			rt.log.Error("more records failed", "count", len(lost)-shown)
			break
		}
		if rt.dlq == nil {
			rt.log.Error("record failed and the route has no dlq", "partition", r.Partition, "position", r.Seq, "reason", r.reason)
		} else {
			rt.log.Error("record failed and the dlq refused it", "partition", r.Partition, "position", r.Seq, "reason", r.reason, "dlq_error", r.sinkErr)
		}
	}
	first := lost[0]
	where := fmt.Sprintf("record %d", first.Seq)
	if rt.src.SeqGaps() || first.Partition != 0 {
		where = fmt.Sprintf("partition %d offset %d", first.Partition, first.Seq)
	}
	var why string
	if rt.dlq == nil {
		why = "the route declares no dlq"
	} else {
		why = "the dlq refused it: " + first.sinkErr
	}
	return &lostRecordsError{route: rt.name, count: len(lost), where: where, reason: first.reason, why: why,
		partition: first.Partition, seq: first.Seq}
}

// lostRecordsError stops a route whose records failed with nowhere to go.
type lostRecordsError struct {
	route  string
	count  int
	where  string
	reason string
	why    string
	// partition and seq are the first lost record's.
	partition int32
	seq       uint64
}

func (e *lostRecordsError) Error() string {
	return fmt.Sprintf("route %s: %d record(s) failed and %s; the first, %s: %s. "+
		"The route stopped before committing past it: fix the cause (or add a dlq) and rerun, which resumes at that record",
		e.route, e.count, e.why, e.where, e.reason)
}

// deadLetter writes dead records to the DLQ with their reason in
// meta["mqb.error"]. A record the DLQ refuses keeps its sinkErr.
func (rt *route) deadLetter(ctx context.Context, dead []*Record) error {
	if len(dead) == 0 {
		return nil
	}
	for _, r := range dead {
		r.setMeta(metaError, r.reason)
	}
	if rt.dlq == nil {
		return nil
	}
	err := rt.retry.write(ctx, rt.dlq, dead, func(err error) {
		rt.log.Warn("dead-letter write failed, retrying", "err", err)
	})
	if err != nil {
		return fmt.Errorf("route %s: dlq: %w", rt.name, err)
	}
	return nil
}

// releaseAll frees the dedup reservations of batches that will not be acked.
func (rt *route) releaseAll(group []*batch) {
	endBatchSpans(group, errRouteFailed)
	for _, b := range group {
		for _, res := range b.reserved {
			if err := res.store.Release(res.keys); err != nil {
				rt.log.Warn("release dedup reservations", "err", err)
			}
		}
		b.reserved = nil
	}
}

// commit saves the contiguous acked position of every partition, after
// making the dedup promotions of the records it covers durable, then hands
// the partitions that moved to the source (a consumer group's offsets, a
// JetStream consumer's acks).
func (rt *route) commit() error {
	rt.commitMu.Lock()
	defer rt.commitMu.Unlock()
	end := rt.commitSpan()
	err := rt.commitLocked()
	end(err)
	return err
}

func (rt *route) commitLocked() error {
	rt.sinceCommit.Store(0)
	changed, all := rt.acks.advance()
	rt.metrics.lag.Set(float64(rt.acks.pending(nil)))
	if changed == nil {
		return nil
	}
	// The bytes of every record acked up to the position taken above
	// were written before its ack: synced now, they are durable before
	// the position is saved.
	if err := rt.syncSinks(); err != nil {
		return err
	}
	for _, d := range rt.dedupStores {
		if rt.cp == nil || !syncedWith(d, rt.cp) {
			if err := d.Sync(); err != nil {
				return fmt.Errorf("route %s: %w", rt.name, err)
			}
		}
	}
	if pos, ok := rt.src.Position(all); ok && rt.cp != nil {
		pos.Plan = rt.plan
		if err := rt.cp.Save(rt.name, pos); err != nil {
			return fmt.Errorf("route %s: %w", rt.name, err)
		}
	}
	if err := rt.src.Commit(context.Background(), changed); err != nil {
		return fmt.Errorf("route %s: %w", rt.name, err)
	}
	rt.storeCommitted()
	return nil
}

// storeCommitted notes how many records the committed position covers.
func (rt *route) storeCommitted() {
	n := rt.acks.committedRecords()
	rt.stats.committed.Store(n)
	rt.metrics.committed.Set(float64(n))
}

// Revoke implements SourceHost: partitions leaving the source are committed
// as far as their acks go, then forgotten.
func (rt *route) Revoke(parts []int32, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for rt.acks.unacked(parts) > 0 && time.Now().Before(deadline) && !rt.failed.Load() {
		time.Sleep(5 * time.Millisecond)
	}
	rt.commitMu.Lock()
	defer rt.commitMu.Unlock()
	err := rt.commitLocked()
	rt.acks.drop(parts)
	return err
}
