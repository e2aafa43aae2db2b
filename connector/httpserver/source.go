package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/connector/internal/brokersrc"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// source is the http_server source. Handlers hand each accepted record
// to Next through in (unbuffered: a record is in the route once Next has
// taken it, and only then), and wait for Commit to take it out of
// unacked, or for the route to stop.
type source struct {
	route   string
	log     *slog.Logger
	address string
	path    string
	maxBody int64
	format  string
	auth    *credentials // nil: no authentication
	tls     *tls.Config  // nil: plain HTTP

	// producerIDReason, set by a PremiseProducerID before Open, answers
	// 400 to every request without an id header (RequireProducerID).
	producerIDReason string

	srv *http.Server

	in       chan *request
	unacked  brokersrc.Unacked[*request] // records handed to the route, not yet committed, by Seq
	seq      uint64                      // Seq of the next record (a per-run count); Next's alone
	draining chan struct{}               // closed when Next sees its context end: new requests get 503
	drainOne sync.Once
	closed   chan struct{} // closed by Close: every request still waiting gets 503
	closeOne sync.Once

	// replies, under request_reply (nil without), holds the requests
	// handed to the route and not yet committed, by Seq, for Reply to
	// find; replyMu guards it and each request's reply.
	replyMu sync.Mutex
	replies map[uint64]*request
}

// request is one record on its way through the route, and the answer its
// handler waits for.
type request struct {
	payload   []byte
	id        uuid.UUID
	stamped   bool          // id came from the client
	seq       uint64        // the record's Seq, once the route took it
	committed chan struct{} // closed by Commit

	// reply is the route's reply, under request_reply, once it delivered
	// the record: one payload, or one per element an unnest made of it
	// (multi), nil for an element it did not deliver. Written by Reply
	// before the route acks the record, read by the handler once Commit
	// closed committed.
	reply  [][]byte
	multi  bool
	header http.Header // the reply's meta headers (replyHeaders), single replies only
}

func newSource(route string, log *slog.Logger) *source {
	return &source{route: route, log: log,
		in: make(chan *request), draining: make(chan struct{}), closed: make(chan struct{})}
}

func (s *source) Name() string         { return "http_server" }
func (s *source) Replayable() bool     { return false }
func (s *source) RecordFormat() string { return s.format }
func (s *source) SeqGaps() bool        { return false }

// Position: there is no position to keep. What was not committed when
// the route stopped was answered 503 (or not at all, at a crash), and its
// client sends it again.
func (s *source) Position(map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	return checkpoint.Position{}, false
}

// AckWindow is 1 (runtime.WindowedSource): each client waits for its
// answer, which Commit gives, so the route commits as soon as a write is
// acked instead of at the next tick; the clients' next requests wait on
// nothing else.
func (s *source) AckWindow() int { return 1 }

// RequireProducerID: a route whose proof rests on ids the clients stamp
// refuses a request that carries none (400), instead of letting an id
// minted per request stand in for it. The record never enters the route,
// and the client, told why, still has it.
func (s *source) RequireProducerID(reason string) { s.producerIDReason = reason }

// Open listens on address and serves until Close.
func (s *source) Open(ctx context.Context, _ checkpoint.Position, _ bool, _ runtime.SourceHost) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.address)
	if err != nil {
		return fmt.Errorf("route %s: http_server source address: listen on %s: %w", s.route, s.address, err)
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), TLSConfig: s.tls, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	scheme := "http"
	go func() {
		var err error
		if s.tls != nil {
			err = s.srv.ServeTLS(ln, "", "")
		} else {
			err = s.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http_server source: serve", "err", err)
		}
	}()
	if s.tls != nil {
		scheme = "https"
	}
	s.log.Info("http_server source", "url", scheme+"://"+ln.Addr().String()+s.path)
	return nil
}

// Next returns the records of the requests waiting, waiting for the
// first. When ctx ends (a drain, or the route failed) it stops taking
// records: new requests are answered 503.
func (s *source) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatch(min(max, 64))
	select {
	case <-ctx.Done():
		s.drainOne.Do(func() { close(s.draining) })
		return b, false, nil
	case r := <-s.in:
		s.add(b, r)
	}
	runtime.Fill(ctx, b, max, s.in, func(r *request) { s.add(b, r) })
	return b, false, nil
}

func (s *source) add(b *runtime.Batch, r *request) {
	rec := runtime.Record{Payload: r.payload, Seq: s.seq, Next: int64(s.seq + 1)}
	r.seq = s.seq
	s.seq++
	if r.stamped {
		rec.SetMessageID(r.id)
	}
	s.unacked.Push(r)
	if s.replies != nil {
		s.replyMu.Lock()
		s.replies[rec.Seq] = r
		s.replyMu.Unlock()
	}
	b.Add(rec)
}

// Commit answers the requests of every record up to the route's
// committed position: each of them was delivered, dead-lettered,
// filtered or found a repeat, and is durable where it went.
func (s *source) Commit(_ context.Context, changed map[int32]runtime.AckPos) error {
	pos, ok := changed[0]
	if !ok {
		return nil
	}
	done := s.unacked.Take(pos.Next)
	if s.replies != nil {
		s.replyMu.Lock()
		for _, r := range done {
			delete(s.replies, r.seq)
		}
		s.replyMu.Unlock()
	}
	for _, r := range done {
		close(r.committed)
	}
	return nil
}

// Close answers 503 to every request still waiting and stops the server.
func (s *source) Close() error {
	var err error
	s.closeOne.Do(func() {
		s.drainOne.Do(func() { close(s.draining) })
		close(s.closed)
		if s.srv == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s.srv.Shutdown(ctx) != nil {
			err = s.srv.Close()
		}
	})
	return err
}
