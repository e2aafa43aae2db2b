package runtime

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing: with Options.Tracer set, every batch a route reads is one trace
// whose root span "mqb.batch" lasts from the read until the batch is acked
// (delivered or dead-lettered) or failed, with a child span per stage:
// "mqb.read" (the source's Next), "mqb.steps" (decode and input steps),
// "mqb.sink.write" (one per group of batches written together, a child of
// the group's first batch and linked to the others) and "mqb.dlq.write".
// Each commit that moves the checkpoint is a span "mqb.commit" of its own.
// Without a tracer none of this runs: no span, no allocation.

// errRouteFailed marks the spans of batches dropped unacked because their
// route failed on another batch: they will be read again by the next run.
var errRouteFailed = errors.New("not acked: the route failed")

// tracerName names the instrumentation scope of mqb's spans.
const tracerName = "github.com/mqb-dev/mqb/runtime"

// startBatchSpan opens b's root span, backdated to t0 when the read
// started, and records the read as its first child.
func (rt *route) startBatchSpan(b *batch, t0 time.Time) {
	if rt.tracer == nil {
		return
	}
	ctx, span := rt.tracer.Start(context.Background(), "mqb.batch",
		trace.WithTimestamp(t0),
		trace.WithAttributes(
			attribute.String("mqb.route", rt.name),
			attribute.Int("mqb.records", b.count()),
			attribute.Int64("mqb.batch.seq", int64(b.seq)),
		))
	_, read := rt.tracer.Start(ctx, "mqb.read", trace.WithTimestamp(t0))
	read.End()
	b.span = span
}

// stageSpan opens a child span of b's trace for one stage; the returned
// function ends it, marking it failed when err is not nil.
func (rt *route) stageSpan(b *batch, name string, opts ...trace.SpanStartOption) func(err error) {
	if rt.tracer == nil || b.span == nil {
		return func(error) {}
	}
	ctx := trace.ContextWithSpan(context.Background(), b.span)
	_, span := rt.tracer.Start(ctx, name, opts...)
	return func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// groupSpan opens the sink write's span for a group of batches: a child
// of the first batch's trace, linked to the others'.
func (rt *route) groupSpan(group []*batch, name string, records int) func(err error) {
	if rt.tracer == nil || len(group) == 0 {
		return func(error) {}
	}
	var links []trace.Link
	for _, b := range group[1:] {
		if b.span != nil {
			links = append(links, trace.Link{SpanContext: b.span.SpanContext()})
		}
	}
	return rt.stageSpan(group[0], name, trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("mqb.records", records), attribute.Int("mqb.batches", len(group))))
}

// endBatchSpans closes the root spans of batches that are done: acked when
// err is nil, failed (not acked, to be read again) otherwise.
func endBatchSpans(group []*batch, err error) {
	for _, b := range group {
		if b.span == nil {
			continue
		}
		if err != nil {
			b.span.RecordError(err)
			b.span.SetStatus(codes.Error, err.Error())
		}
		b.span.End()
		b.span = nil
	}
}

// traceAttrs are the log attributes naming the trace of b, so a log line
// about a batch can be found in the tracing backend; none without tracing.
func traceAttrs(b *batch) []any {
	if b == nil || b.span == nil {
		return nil
	}
	sc := b.span.SpanContext()
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}

// commitSpan opens the span of one commit, which is not part of any
// batch's trace: it covers every batch acked since the last one.
func (rt *route) commitSpan() func(err error) {
	if rt.tracer == nil {
		return func(error) {}
	}
	t0 := time.Now()
	before := rt.stats.committed.Load()
	return func(err error) {
		if rt.stats.committed.Load() == before && err == nil {
			return // nothing to commit: no span
		}
		_, span := rt.tracer.Start(context.Background(), "mqb.commit",
			trace.WithTimestamp(t0),
			trace.WithAttributes(attribute.String("mqb.route", rt.name),
				attribute.Int64("mqb.committed", rt.stats.committed.Load())))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
