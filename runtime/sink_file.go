package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// fileSink appends one line per record to a file (name_by = write_time),
// fsyncing once per batch.
type fileSink struct {
	route string
	path  string
	// envelope writes {"error", "meta", "payload"} lines instead of the bare
	// payload: a DLQ file must say why each record is there.
	envelope bool

	mu  sync.Mutex
	f   *os.File
	buf []byte
}

func newFileSink(a nodeAttrs, base string, envelope bool) (*fileSink, error) {
	path := a.str("path", "")
	if path == "" {
		return nil, a.errorf("path", "required")
	}
	if !filepath.IsAbs(path) && base != "" {
		path = filepath.Join(base, path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, a.errorf("path", "%v", err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, a.errorf("path", "%v", err)
	}
	if err := dropTornTail(f); err != nil {
		f.Close()
		return nil, a.errorf("path", "repair %s: %v", path, err)
	}
	return &fileSink{route: a.route, path: path, envelope: envelope, f: f}, nil
}

// dropTornTail truncates an unterminated last line. The sink writes whole
// lines and acks them only after fsync, so a line without its newline is
// what a crash (or a failed write) left of a write that was never acked:
// its records are written again, and appending after the fragment would
// glue the next record onto it.
func dropTornTail(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for end := st.Size(); end > 0; {
		n := min(int64(len(buf)), end)
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return err
		}
		if end == st.Size() && buf[n-1] == '\n' {
			return nil
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return f.Truncate(end - n + int64(i) + 1)
		}
		end -= n
	}
	if st.Size() > 0 {
		return f.Truncate(0)
	}
	return nil
}

func (s *fileSink) Write(_ context.Context, recs []*Record) error {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := s.buf[:0]
	for _, r := range recs {
		var err error
		if buf, err = appendLine(buf, r, s.envelope); err != nil {
			r.sinkErr = err.Error()
		}
	}
	s.buf = buf
	if _, err := s.f.Write(buf); err != nil {
		dropTornTail(s.f) // best effort: the retry appends whole lines again
		return retryable(fmt.Errorf("route %s: file sink %s: write: %w", s.route, s.path, err))
	}
	if err := s.f.Sync(); err != nil {
		return retryable(fmt.Errorf("route %s: file sink %s: fsync: %w", s.route, s.path, err))
	}
	return nil
}

func (s *fileSink) Close() error { return s.f.Close() }

// appendLine appends r as one line: its payload, or the DLQ envelope.
func appendLine(buf []byte, r *Record, envelope bool) ([]byte, error) {
	if err := encodePayload(r); err != nil {
		return buf, err
	}
	if !envelope {
		buf = append(buf, r.Payload...)
		return append(buf, '\n'), nil
	}
	env := struct {
		Error    string            `json:"error"`
		Position uint64            `json:"position"`
		Meta     map[string]string `json:"meta,omitempty"`
		Payload  json.RawMessage   `json:"payload,omitempty"`
		Raw      string            `json:"raw,omitempty"`
	}{Error: r.Meta[metaError], Position: r.Seq, Meta: r.Meta}
	if json.Valid(r.Payload) {
		env.Payload = r.Payload
	} else {
		env.Raw = string(r.Payload)
	}
	b, err := json.Marshal(env)
	if err != nil {
		return buf, err
	}
	buf = append(buf, b...)
	return append(buf, '\n'), nil
}

// partSink writes immutable part files named for the source positions they
// cover (name_by = source_position): path is a directory; each batch is
// grouped into runs of consecutive positions, each run staged to a temp
// name, fsynced and renamed. At start-up the existing parts are listed and
// a replayed record whose position is covered is skipped, record by record,
// so batch boundaries may differ between runs.
type partSink struct {
	route  string
	dir    string
	source string // sanitised source name in the part names
	epoch  string // follow-mode sources: positions restart each run

	mu      sync.Mutex
	covered partitionRanges
	buf     []byte
}

// partNameRE parses a part file name: part-<source>-<partition>-<start>-<end>.jsonl,
// numbers zero-padded. Parts written before sources had partitions lack
// the partition and cover partition 0.
var partNameRE = regexp.MustCompile(`^part-(.+?)(?:-(\d{10}))?-(\d{20})-(\d{20})\.jsonl$`)

func partFileName(source string, partition int32, first, last uint64) string {
	return fmt.Sprintf("part-%s-%010d-%020d-%020d.jsonl", source, partition, first, last)
}

func newPartSink(a nodeAttrs, base, source, epoch string) (*partSink, error) {
	dir := a.str("path", "")
	if dir == "" {
		return nil, a.errorf("path", "required")
	}
	if !filepath.IsAbs(dir) && base != "" {
		dir = filepath.Join(base, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, a.errorf("path", "Failed to create part-file sink directory: %v", err)
	}
	s := &partSink{route: a.route, dir: dir, source: source, epoch: epoch, covered: partitionRanges{}}
	if epoch != "" {
		s.source = source + "-" + epoch
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, a.errorf("path", "list part files: %v", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".part-") && strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(dir, name)) // a write that never committed
			continue
		}
		m := partNameRE.FindStringSubmatch(name)
		if m == nil || m[1] != s.source {
			continue
		}
		var part uint64
		var err0 error
		if m[2] != "" {
			part, err0 = strconv.ParseUint(m[2], 10, 31)
		}
		start, err1 := strconv.ParseUint(m[3], 10, 64)
		end, err2 := strconv.ParseUint(m[4], 10, 64)
		if err0 != nil || err1 != nil || err2 != nil || end < start {
			continue
		}
		s.covered.add(int32(part), start, end)
	}
	return s, nil
}

// skipCovered marks records already in a part file as duplicates.
func (s *partSink) skipCovered(recs []Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range recs {
		if recs[i].state == stLive && s.covered.contains(&recs[i]) {
			recs[i].state = stDuplicate
		}
	}
}

func (s *partSink) Write(_ context.Context, recs []*Record) error {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var live []*Record
	for _, r := range recs {
		if !s.covered.contains(r) {
			live = append(live, r)
		}
	}
	wrote := false
	for _, run := range positionRuns(live) {
		if err := s.writeRun(run); err != nil {
			return err
		}
		wrote = true
	}
	if wrote {
		if err := syncDir(s.dir); err != nil {
			return retryable(fmt.Errorf("route %s: file sink %s: fsync directory: %w", s.route, s.dir, err))
		}
	}
	return nil
}

func (s *partSink) writeRun(run []*Record) error {
	buf := s.buf[:0]
	for _, r := range run {
		var err error
		if buf, err = appendLine(buf, r, false); err != nil {
			// A record that cannot be encoded splits the run: fail it alone.
			r.sinkErr = err.Error()
		}
	}
	s.buf = buf
	part, first, last := run[0].Partition, run[0].Seq, run[len(run)-1].Seq
	name := partFileName(s.source, part, first, last)
	final := filepath.Join(s.dir, name)
	tmp := filepath.Join(s.dir, "."+name+".tmp")
	if err := writeFileSync(tmp, buf); err != nil {
		os.Remove(tmp)
		return retryable(fmt.Errorf("route %s: file sink %s: %w", s.route, s.dir, err))
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return retryable(fmt.Errorf("route %s: file sink %s: rename part: %w", s.route, s.dir, err))
	}
	s.covered.add(part, first, last)
	return nil
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *partSink) Close() error { return nil }
