package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/plan"
)

// Entries trimmed before the group read them.
//
// A stream is trimmed from its head (XTRIM, or XADD with MAXLEN or MINID,
// exact or approximate): an entry the group had not been delivered yet
// goes with the rest, and XREADGROUP ">" then delivers the first entry
// left as if the ones before it had never been. The source tells that
// from the server's counters, measured on Redis 7.0:
//
//   - the stream's entries-added (A) counts every entry ever added, and
//     length (N) those still there; trims and XDEL both lower N only;
//   - the group's entries-read (R) is the count of entries added up to
//     its last-delivered-id (L), kept by the server as the group reads.
//     It is nil (unknown) for a group made by XGROUP CREATE or moved by
//     XGROUP SETID without ENTRIESREAD, and while an entry deleted with
//     XDEL lies ahead of L; the server works it out again when the group
//     reads the first entry of the stream or its last one;
//   - max-deleted-entry-id (D) is the largest id ever removed by XDEL
//     (trims leave it alone), 0-0 if none ever was.
//
// When every entry up to L was removed (L is before the stream's first
// entry, or the stream is empty), A-N entries are gone, and R of them
// were delivered to the group: A-N-R > 0 more were removed before any
// consumer of the group read them. That is certain when D is 0-0 (no
// entry of the stream was ever deleted with XDEL, so each was trimmed,
// and R is exact). Otherwise the server may have counted an entry
// deleted with XDEL among them, or have been short by one in R when the
// group read past such an entry (measured: an XDEL right after L, then a
// read, adds 1 to R for 2 entries), so "up to A-N-R" entries: a WARN,
// and the route reads on.
//
// An entry the producer deletes with XDEL before the group read it is
// not a loss: the producer took it back. An entry the group was
// delivered and not yet acknowledged that is trimmed is not passed over
// either: it stays pending with its fields gone, and the source
// dead-letters it when it reads it again (add).
//
// The check and the read it guards run in one script (readScript), so
// that a trim cannot come between them: when entries were lost, the
// group does not read past them, and every consumer of the group stops
// at them, now and at every rerun, until the loss is accepted (XGROUP
// SETID with ENTRIESREAD, as the error says). The wait for new entries
// is an XREAD of the stream after L, which moves nothing; the script
// reads what it found.

// luaCmpID is the scripts' comparison of two entry ids ("ms-seq"): -1, 0
// or 1, by number (a Lua string comparison would put 10-0 before 9-0).
const luaCmpID = `
local function cmpid(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if not am or not bm then return 0 end
  if #am ~= #bm then return #am < #bm and -1 or 1 end
  if am ~= bm then return am < bm and -1 or 1 end
  if #as ~= #bs then return #as < #bs and -1 or 1 end
  if as ~= bs then return as < bs and -1 or 1 end
  return 0
end
`

// readScript checks the stream's counters for entries trimmed before the
// group read them and, unless it finds some for certain, reads up to
// ARGV[3] new entries as consumer ARGV[2] of group ARGV[1]
// (XREADGROUP ">", never blocking). KEYS[1] is the stream.
//
// It returns {state, L, R, A, N, D, first, entries}: state is "ok",
// "gone" (certain; nothing was read), "maybe" (up to A-N-R entries may
// have been trimmed; read on), "unknown" (the stream was trimmed past L
// and R is nil; not for a group that never read, L 0-0, made by hand
// without ENTRIESREAD: it starts where the stream begins, as the
// server's own lag counts it) or "nocheck" (the server keeps no entries-added: Redis
// before 7.0); R and A are -1 when nil; first is the stream's first
// entry id ("" when it is empty, then L is compared with the last id
// the stream generated); entries are {id, {field, value, ...}} pairs.
// After a "maybe" read the group's entries-read is cleared (XGROUP SETID
// without ENTRIESREAD): counting the same entries again at the next
// trim would be wrong, and the server works it out again later.
var readScript = goredis.NewScript(luaCmpID + `
local function fields(t)
  local m = {}
  for i = 1, #t, 2 do m[t[i]] = t[i + 1] end
  return m
end
local state, L, R, A, N, D, first = 'nocheck', '', -1, -1, 0, '', ''
local ok, info = pcall(redis.call, 'XINFO', 'STREAM', KEYS[1])
local g
if ok then
  for _, gi in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local f = fields(gi)
    if f['name'] == ARGV[1] then g = f break end
  end
end
if ok and g then
  local st = fields(info)
  L, N, D = g['last-delivered-id'], st['length'], st['max-deleted-entry-id'] or ''
  if st['first-entry'] then first = st['first-entry'][1] end
  if st['entries-added'] then
    A = st['entries-added']
    if g['entries-read'] then R = g['entries-read'] end
    local past
    if first == '' then past = cmpid(L, st['last-generated-id']) < 0 else past = cmpid(L, first) < 0 end
    state = 'ok'
    if past and R < 0 then
      if L ~= '0-0' then state = 'unknown' end
    elseif past and A - N - R > 0 then
      if D == '0-0' then
        return {'gone', L, R, A, N, D, first, {}}
      end
      state = 'maybe'
    end
  end
end
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
local entries = {}
if r and r[1] then entries = r[1][2] end
if state == 'maybe' and #entries > 0 then
  redis.call('XGROUP', 'SETID', KEYS[1], ARGV[1], entries[#entries][1])
end
return {state, L, R, A, N, D, first, entries}
`)

// createScript creates group ARGV[1] of stream KEYS[1] at ARGV[2] ("0"
// or "$"), and the stream with it, with its entries-read counter set
// (ENTRIESREAD), where XGROUP CREATE leaves it nil: at "$" the entries
// the stream has had, at "0" those before its first entry (all trimmed
// before the group was made: not the group's loss). Without a counter
// the first trim past the group's position could not be checked until
// it read. Left nil when the stream holds an entry deleted with XDEL
// (the count before its first entry is not known) or the server keeps
// no entries-added (Redis before 7.0).
var createScript = goredis.NewScript(luaCmpID + `
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '$', 'MKSTREAM', 'ENTRIESREAD', 0)
end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local st = {}
for i = 1, #info, 2 do st[info[i]] = info[i + 1] end
local A, N, D = st['entries-added'], st['length'], st['max-deleted-entry-id']
if not A then
  return redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[2])
end
if ARGV[2] == '$' then
  return redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '$', 'ENTRIESREAD', A)
end
if N == 0 or D == '0-0' or cmpid(D, st['first-entry'][1]) < 0 then
  return redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[2], 'ENTRIESREAD', A - N)
end
return redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], ARGV[2])
`)

// readReply is readScript's answer.
type readReply struct {
	state   string
	last    string // the group's last-delivered-id before the read
	read    int64  // its entries-read, -1 if nil
	added   int64  // the stream's entries-added, -1 if none
	length  int64
	deleted string // max-deleted-entry-id
	first   string // the stream's first entry id, "" when empty
	msgs    []goredis.XMessage
}

// gone is the count of entries removed before the group read them (or,
// for "maybe", the most there can be).
func (r *readReply) gone() int64 { return r.added - r.length - r.read }

// readNew reads up to max new entries (">") through readScript, which
// checks first that no entry the group had not been delivered was
// trimmed. When some were, the reply's state is "gone" and nothing was
// read (Next stops the route with trimmedError); it logs the cases it
// cannot decide.
func (s *redisSource) readNew(ctx context.Context, max int) (*readReply, error) {
	v, err := readScript.Run(ctx, s.c, []string{s.stream}, s.group, s.consumer, max).Result()
	if err != nil {
		return nil, err
	}
	r, err := parseReadReply(v)
	if err != nil {
		return nil, fmt.Errorf("the read script's reply: %w", err)
	}
	switch r.state {
	case "maybe":
		if time.Since(s.warnedMaybe) > time.Minute {
			s.warnedMaybe = time.Now()
			s.log.Warn(fmt.Sprintf("redis source: up to %d entries the group had not been delivered may have been trimmed from the stream before it read them (after its last delivered entry %s, before the stream's first %s); "+
				"the stream has had entries deleted with XDEL (the last %s), which the server's counters do not tell from trimmed ones, so the route reads on", r.gone(), r.last, orEmpty(r.first), r.deleted),
				"stream", s.stream, "group", s.group, "entries_added", r.added, "length", r.length, "entries_read", r.read)
		}
	case "unknown":
		if !s.warnedUnknown {
			s.warnedUnknown = true
			s.log.Warn("redis source: the stream was trimmed past the group's last delivered entry and the group's entries-read counter is unknown (an entry deleted with XDEL ahead of it, or XGROUP CREATE/SETID without ENTRIESREAD): whether entries it had not been delivered were trimmed cannot be told",
				"stream", s.stream, "group", s.group, "last_delivered", r.last, "first", orEmpty(r.first))
		}
	case "nocheck":
		if !s.warnedNoCheck {
			s.warnedNoCheck = true
			s.log.Warn("redis source: the server keeps no entries-added counter (Redis before 7.0): entries trimmed before the group read them cannot be told", "stream", s.stream)
		}
	}
	return r, nil
}

func orEmpty(id string) string {
	if id == "" {
		return "(the stream is empty)"
	}
	return id
}

// trimmedError is the error that stops the route: entries were trimmed
// from the stream before any consumer of the group read them.
func (s *redisSource) trimmedError(r *readReply) error {
	where := "before the stream's first entry " + r.first
	if r.first == "" {
		where = "up to the stream's last entry (the stream is now empty)"
	}
	return fmt.Errorf("route %s: redis source stream %s group %s: %d entries were trimmed from the stream (XTRIM, or XADD with MAXLEN or MINID) before any consumer of the group read them: "+
		"those after the group's last delivered entry %s and %s (the stream has had %d entries added and keeps %d, and %d were delivered to the group); "+
		"the route stops rather than pass over them without a word. They cannot be read any more; to go on, accepting their loss: XGROUP SETID %s %s %s ENTRIESREAD %d, and run the route again",
		s.route, s.stream, s.group, r.gone(), r.last, where, r.added, r.length, r.read,
		s.stream, s.group, r.last, r.added-r.length)
}

// parseReadReply reads readScript's reply.
func parseReadReply(v any) (*readReply, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 8 {
		return nil, fmt.Errorf("%T %v, want 8 items", v, v)
	}
	r := &readReply{}
	var okAll = true
	str := func(x any) string {
		s, ok := x.(string)
		okAll = okAll && ok
		return s
	}
	num := func(x any) int64 {
		n, ok := x.(int64)
		okAll = okAll && ok
		return n
	}
	r.state, r.last, r.read, r.added, r.length, r.deleted, r.first = str(a[0]), str(a[1]), num(a[2]), num(a[3]), num(a[4]), str(a[5]), str(a[6])
	entries, _ := a[7].([]any)
	for _, e := range entries {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("entry %v", e)
		}
		m := goredis.XMessage{ID: str(pair[0])}
		if kv, ok := pair[1].([]any); ok {
			m.Values = make(map[string]any, len(kv)/2)
			for i := 0; i+1 < len(kv); i += 2 {
				m.Values[str(kv[i])] = str(kv[i+1])
			}
		}
		r.msgs = append(r.msgs, m)
	}
	if !okAll {
		return nil, fmt.Errorf("unexpected types in %v", v)
	}
	return r, nil
}

// scriptRefused reports whether err is the server refusing scripts (an
// ACL without @scripting, a proxy without EVAL): the source then reads
// without the check, and says so.
func scriptRefused(err error) bool {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "unknown command")
}

// scriptOff makes the source read without the check from now on.
func (s *redisSource) scriptOff(err error) {
	s.noScript = true
	s.log.Warn("redis source: the server refuses scripts; entries trimmed from the stream before the group read them cannot be told, and would be passed over",
		"stream", s.stream, "err", plan.RedactURLs(err.Error()))
}
