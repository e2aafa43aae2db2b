package lsp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strconv"
	"strings"

	"go.lsp.dev/jsonrpc2"
)

// Bounds on one frame from the client. An editor's headers are a few
// dozen bytes and a message at most a few MiB (a whole document); past
// these the peer is not an editor speaking LSP, and reading on would only
// hold memory for it.
const (
	maxHeaderBytes = 8 << 10
	maxBodyBytes   = 64 << 20
)

// errFraming marks a frame the server cannot read past: a header line
// without a colon, a missing, malformed or oversized Content-Length, a
// header block over maxHeaderBytes, a stream cut inside a frame. Where the
// next frame starts is then unknown, so the server logs it and stops
// (mqbc lsp exits 1). A well-framed body that is not a JSON-RPC message
// is different: the next frame's start is known, so it is logged and
// skipped, and the server goes on.
var errFraming = errors.New("LSP framing error")

// frameStream is jsonrpc2's Content-Length framing with bounded reads:
// jsonrpc2.NewStream reads header lines of any length and allocates
// whatever Content-Length says. Writes are jsonrpc2's.
type frameStream struct {
	in  *bufio.Reader
	out jsonrpc2.Stream
	log *log.Logger
}

func newFrameStream(rwc io.ReadWriteCloser, logger *log.Logger) *frameStream {
	return &frameStream{in: bufio.NewReader(rwc), out: jsonrpc2.NewStream(rwc), log: logger}
}

// Read returns the next message. io.EOF at a frame boundary is the client
// closing the stream; any other error ends the connection.
func (s *frameStream) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, total, err
		}
		body, n, err := s.readFrame()
		total += n
		if err != nil {
			return nil, total, err // Serve returns a framing error; io.EOF is the client leaving
		}
		msg, err := jsonrpc2.DecodeMessage(body)
		if err != nil {
			s.log.Printf("skipped a %d-byte message that is not JSON-RPC 2.0: %v", len(body), err)
			continue
		}
		return msg, total, nil
	}
}

// readFrame reads one header block and its body.
func (s *frameStream) readFrame() (body []byte, n int64, err error) {
	length := int64(-1)
	var line []byte
	for {
		b, err := s.in.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) && n == 0 {
				return nil, 0, io.EOF
			}
			return nil, n, fmt.Errorf("%w: the stream ended inside a header (%d bytes read): %v", errFraming, n, err)
		}
		n++
		if n > maxHeaderBytes {
			return nil, n, fmt.Errorf("%w: header longer than %d bytes", errFraming, maxHeaderBytes)
		}
		if b != '\n' {
			line = append(line, b)
			continue
		}
		text := strings.TrimRight(string(line), "\r")
		line = line[:0]
		if text == "" {
			break
		}
		name, value, ok := strings.Cut(text, ":")
		if !ok {
			return nil, n, fmt.Errorf("%w: header line %q has no colon", errFraming, clip(text))
		}
		if !strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			continue // Content-Type and any other header are ignored
		}
		v, perr := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		switch {
		case perr != nil || v < 0:
			return nil, n, fmt.Errorf("%w: Content-Length %q is not a byte count", errFraming, clip(strings.TrimSpace(value)))
		case v > maxBodyBytes:
			return nil, n, fmt.Errorf("%w: Content-Length %d is over the %d-byte limit on one message", errFraming, v, maxBodyBytes)
		case length >= 0 && v != length:
			return nil, n, fmt.Errorf("%w: two Content-Length headers (%d and %d)", errFraming, length, v)
		}
		length = v
	}
	if length < 0 {
		return nil, n, fmt.Errorf("%w: a header without Content-Length", errFraming)
	}
	body = make([]byte, length)
	got, err := io.ReadFull(s.in, body)
	n += int64(got)
	if err != nil {
		return nil, n, fmt.Errorf("%w: the stream ended %d bytes into a %d-byte message", errFraming, got, length)
	}
	return body, n, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Write sends msg with jsonrpc2's framing.
func (s *frameStream) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	return s.out.Write(ctx, msg)
}

// Close closes the underlying connection.
func (s *frameStream) Close() error { return s.out.Close() }
