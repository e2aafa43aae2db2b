package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// redisConfig is what both ends of a redis endpoint read (stdlib declares
// the attributes and their defaults).
type redisConfig struct {
	URL          []plan.Part `attr:"url"` // rendered by RenderStatic (env() allowed)
	Stream       []plan.Part `attr:"stream"`
	PayloadField string      `attr:"payload_field"`
}

// newClient opens a client for url. retries is the number of times the
// client repeats a command that failed on the network: the source sets
// none, so that it sees every failed read (see redisSource.Next).
func newClient(url string, retries int) (*goredis.Client, error) {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", plan.RedactURLs(url), plan.RedactURLs(err.Error()))
	}
	opts.DisableIdentity = true // CLIENT SETINFO is newer than Redis 7.0
	opts.MaxRetries = retries
	opts.DialTimeout = 5 * time.Second
	opts.ReadTimeout = 30 * time.Second // blocking reads extend it by their block
	opts.WriteTimeout = 30 * time.Second
	return goredis.NewClient(opts), nil
}

// seqBits is how many low bits of a record's Seq hold the sequence part
// of its entry id; the rest hold the milliseconds part.
const seqBits = 21

// entrySeq maps the stream entry id ms-seq to the record's Seq,
// ms<<21 | seq, which grows with the id: a re-read gives an entry the
// same Seq. ok is false for an id outside the range this holds
// (milliseconds from 2^42, the year 2109, or a sequence part from 2^21,
// which only explicit ids reach).
func entrySeq(id string) (uint64, bool) {
	msText, seqText, found := strings.Cut(id, "-")
	if !found {
		return 0, false
	}
	ms, err1 := strconv.ParseUint(msText, 10, 64)
	seq, err2 := strconv.ParseUint(seqText, 10, 64)
	if err1 != nil || err2 != nil || ms >= 1<<42 || seq >= 1<<seqBits {
		return 0, false
	}
	return ms<<seqBits | seq, true
}

// entryIDSpace names the UUIDs derived from a stream and an entry id, and
// from a producer's mq_bridge.message_id that is not a UUID.
var entryIDSpace = uuid.MustParse("3f0b8c52-6f0e-4a4e-8d7c-2b9e51c0a7d4")

// entryMessageID is the identity of entry id of stream: its
// mq_bridge.message_id field when the producer stamped one (a UUID as
// our sink writes it, or any other text hashed into one), else derived
// from the stream and the entry id. Either is the same on every re-read.
func entryMessageID(stream, id string, fields map[string]any) (uuid.UUID, bool) {
	if v, ok := fields[runtime.HeaderMessageID].(string); ok && v != "" {
		if u, err := uuid.Parse(v); err == nil {
			return u, true
		}
		return uuid.NewSHA1(entryIDSpace, []byte(v)), true
	}
	return uuid.NewSHA1(entryIDSpace, []byte(stream+"\x00"+id)), false
}

// staticStream is a stream attribute with no placeholder, as a source
// needs it.
func staticStream(b *runtime.BuildEnv, parts []plan.Part) (string, error) {
	var s string
	for _, p := range parts {
		if p.Expr != "" {
			return "", b.Errorf("stream", "a source reads one stream: ${%s} has no record to render from", p.Expr)
		}
		s += p.Lit
	}
	if s == "" {
		return "", b.Errorf("stream", "required")
	}
	return s, nil
}

// quietLogger drops go-redis's own log lines (a failed dial, say): the
// source and sink report what failed, with the route's logger.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { goredis.SetLogger(quietLogger{}) }
