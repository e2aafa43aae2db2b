package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Object store sinks: object_store writing a prefix of a local directory
// (file://out/…) or of an S3 bucket (s3://sink/out/…, on an emulator of
// the run directory's own), named by auto (the default: source_position
// over a source with a position, write_time over one without), by
// source_position, or by write_time, now and then under date prefixes or
// split into small objects. The verdict rests on the naming: positional
// names let a replay find what it wrote, names by the clock do not.
//
// The harness reads an object store sink back as a directory of part
// files: a file:// prefix is one, and the S3 emulator mirrors every
// object it holds into the run directory under its key (s3Mirror), as
// the object lands, before the sink is answered.
//
// The draws come from a stream of their own (Case.obj), so a seed that
// draws none generates what it did before; a seed that draws one counts
// as drawing a rule shape (-rules checks it).

const s3SinkBucket = "sink"

// objectStores turns the sinks of this file on.
var objectStores = true

// pickObjectStores gives c the stream of this file's sinks.
func pickObjectStores(c *Case) {
	if !objectStores || c.Seed <= 10 {
		return
	}
	c.obj = rand.New(rand.NewPCG(c.Seed, 0x0b57))
}

// positional reports whether the case's source has a position positional
// names can follow (the compiler refuses name_by = source_position over
// one without).
func (c *Case) positional() bool {
	switch c.Broker {
	case brokerNATS, brokerNATSCore, brokerAMQP, brokerMQTT, brokerHTTP, brokerMongo:
		return false
	}
	return true
}

// objectStoreLeaf is, for some sinks, an object_store sink; "" when not
// drawn.
func (g *routeGen) objectStoreLeaf(group string) string {
	r := g.c.obj
	// (Not a branch of a switch on a per-delivery value: its branches
	// are built alike, from the route's stream.)
	if r == nil || group != "" || r.IntN(100) >= 12 {
		return ""
	}
	g.c.ruleDrawn = true
	n := g.next()
	path := fmt.Sprintf("out/%s__o%d", g.name, n)
	url := "file://" + path
	var attrs []string
	if g.c.Broker != brokerS3 && r.IntN(2) == 0 {
		// (endpoint takes no placeholder: the emulator is found by
		// AWS_ENDPOINT_URL_S3, which a case reading the S3 source sets
		// for its own emulator, so such a case draws file:// only.)
		url = fmt.Sprintf("s3://%s/%s", s3SinkBucket, path)
		attrs = append(attrs, "path_style = true")
	}
	// Every draw is made whatever the source, so a seed's later draws do
	// not depend on it.
	k, written, dated, small, size := r.IntN(10), r.IntN(2) == 0, r.IntN(3) == 0, r.IntN(4) == 0, 200+r.IntN(400)
	switch {
	case k < 4:
		// auto, left unset or written.
		if written {
			attrs = append(attrs, "name_by = auto")
		}
	case k < 7 && g.c.positional():
		attrs = append(attrs, "name_by = source_position")
	case k < 7:
		attrs = append(attrs, "name_by = write_time")
	default:
		attrs = append(attrs, "name_by = write_time")
		if dated {
			attrs = append(attrs, "date_partition = true")
		}
	}
	if small {
		// Objects of a few records: a batch is split.
		attrs = append(attrs, fmt.Sprintf("max_object_bytes = %d", size))
	}
	g.arts = append(g.arts, Artifact{Kind: "parts", Path: path, Group: path, Volatile: g.volatileFields()})
	return fmt.Sprintf("object_store { url = %q, %s }", url, strings.Join(attrs, ", "))
}

// s3Mirror is a gofakes3 backend that keeps, besides its objects in
// memory, a copy of each under dir/key, written before the put is
// answered and removed with the object.
type s3Mirror struct {
	*s3mem.Backend
	dir string
}

func (m *s3Mirror) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	res, err := m.Backend.PutObject(bucket, key, meta, input, size, cond)
	if err != nil {
		return res, err
	}
	obj, err := m.Backend.GetObject(bucket, key, nil)
	if err != nil {
		return res, err
	}
	defer obj.Contents.Close()
	body, err := io.ReadAll(obj.Contents)
	if err != nil {
		return res, err
	}
	return res, m.write(key, body)
}

// write puts body at dir/key through a dot-named temp file (which the
// harness's reader skips), so no half object is ever read.
func (m *s3Mirror) write(key string, body []byte) error {
	path := m.path(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), ".mirror-"+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// path is where key's copy lives; a key leaving dir is kept inside it.
func (m *s3Mirror) path(key string) string {
	return filepath.Join(m.dir, filepath.Clean("/"+key))
}

func (m *s3Mirror) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	res, err := m.Backend.DeleteObject(bucket, key)
	if err == nil {
		os.Remove(m.path(key))
	}
	return res, err
}

func (m *s3Mirror) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	res, err := m.Backend.DeleteMulti(bucket, keys...)
	for _, d := range res.Deleted {
		os.Remove(m.path(d.Key))
	}
	return res, err
}

func (m *s3Mirror) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	res, err := m.Backend.CopyObject(srcBucket, srcKey, dstBucket, dstKey, meta)
	if err != nil {
		return res, err
	}
	obj, err := m.Backend.GetObject(dstBucket, dstKey, nil)
	if err != nil {
		return res, err
	}
	defer obj.Contents.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(obj.Contents); err != nil {
		return res, err
	}
	return res, m.write(dstKey, b.Bytes())
}

// startS3Sink starts, for a run directory whose routes write s3:// object
// store sinks, an S3 emulator holding bucket sink, mirrored into dir; env
// points the routes at it.
func startS3Sink(dir string) (env []string, stop func(), err error) {
	backend := &s3Mirror{Backend: s3mem.New(), dir: dir}
	if err := backend.CreateBucket(s3SinkBucket); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()}
	go srv.Serve(ln)
	env = []string{
		"AWS_ENDPOINT_URL_S3=http://" + ln.Addr().String(),
		"AWS_ACCESS_KEY_ID=mqb-test",
		"AWS_SECRET_ACCESS_KEY=mqb-test-secret",
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
	}
	return env, func() { srv.Close() }, nil
}

// withObjectStores starts what the s3:// sinks of source need for run
// directory dir, adding to h's environment and stop.
func withObjectStores(dir, source string, h *srcHandle) (*srcHandle, error) {
	if h == nil || !strings.Contains(source, "s3://"+s3SinkBucket+"/") {
		return h, nil
	}
	env, stop, err := startS3Sink(dir)
	if err != nil {
		h.stop()
		return nil, fmt.Errorf("the S3 emulator for the object_store sinks: %w", err)
	}
	h.env = append(h.env, env...)
	prev := h.stop
	h.stop = func() { stop(); prev() }
	return h, nil
}
