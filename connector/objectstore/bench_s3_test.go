package objectstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
)

// benchS3Records is how many lines the S3 benchmarks move.
const benchS3Records = 100000

// BenchmarkObjectStoreS3: file → object_store (source_position parts of
// up to 1024 lines) on the S3 emulator, one fresh prefix per run.
func BenchmarkObjectStoreS3(b *testing.B) {
	startS3(b)
	input, size := plantest.BenchInput(b, benchS3Records)
	runtest.Bench(b, benchS3Records, size, func(i int, state string) plan.Plan {
		e := plantest.Env{Input: input, State: state, DLQ: filepath.Join(state, "dlq.jsonl")}
		return objectPlan(e, fmt.Sprintf("s3://lake/run%d", i), 1024, 1, map[string]plan.Value{"name_by": plantest.Enum("source_position")})
	})
}

// BenchmarkS3SDKPutBaseline is the baseline of BenchmarkObjectStoreS3: a
// plain AWS SDK v2 loop on the same emulator reads the same file and puts
// it in parts of 1024 lines, each once (If-None-Match: *), one after
// another; no checkpoint, no listing, no part names from positions.
func BenchmarkS3SDKPutBaseline(b *testing.B) {
	srv := startS3(b)
	input, size := plantest.BenchInput(b, benchS3Records)
	c := srv.Client()
	ctx := context.Background()
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		f, err := os.Open(input)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var part bytes.Buffer
		lines, parts := 0, 0
		put := func() {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(fmt.Sprintf("plain%d/part-%08d.jsonl", i, parts)),
				Body: bytes.NewReader(part.Bytes()), IfNoneMatch: aws.String("*")})
			if err != nil {
				b.Fatal(err)
			}
			part.Reset()
			parts++
		}
		for sc.Scan() {
			part.Write(sc.Bytes())
			part.WriteByte('\n')
			if lines++; lines%1024 == 0 {
				put()
			}
		}
		if part.Len() > 0 {
			put()
		}
		f.Close()
		if lines != benchS3Records {
			b.Fatalf("%d lines, want %d", lines, benchS3Records)
		}
	}
	b.ReportMetric(float64(benchS3Records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// s3BenchSource puts the benchmark's input on the emulator under
// s3://lake/src, cut into 10 objects (gzip and zstd in rotation, as
// putObjects writes them), and returns the input's size.
func s3BenchSource(b *testing.B) int64 {
	input, size := plantest.BenchInput(b, benchS3Records)
	data, err := os.ReadFile(input)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	putObjects(b, "s3://lake/src", plantest.Dataset{Lines: lines}, benchS3Records/10)
	return size
}

// BenchmarkObjectStoreSourceS3: object_store source on the S3 emulator →
// file (write_time), with a fresh checkpoint per run.
func BenchmarkObjectStoreSourceS3(b *testing.B) {
	startS3(b)
	size := s3BenchSource(b)
	out := b.TempDir()
	runtest.Bench(b, benchS3Records, size, func(i int, state string) plan.Plan {
		nodes := []plan.Node{
			{ID: "n0", Role: plan.RoleSource, Kind: "object_store", Attrs: map[string]plan.Value{
				"url": plantest.Tmpl(plantest.Lit("s3://lake/src")), "checkpoint_store": plantest.Str("pebble://" + state),
				"path_style": {Type: plan.TBool, Bool: true}}},
			{ID: "n1", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{
				"path": plantest.Str(filepath.Join(out, fmt.Sprintf("out%d.jsonl", i))), "name_by": plantest.Enum("write_time")}},
		}
		return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "read", Concurrency: 1, BatchSize: 1024,
			Nodes: nodes, Edges: plantest.Chain(nodes)}}}
	})
}

// BenchmarkS3SDKGetBaseline is the baseline of
// BenchmarkObjectStoreSourceS3: a plain AWS SDK v2 loop lists the same
// objects, gets each, decompresses it and appends its lines to a file,
// synced at the end; no checkpoint, no per-record positions.
func BenchmarkS3SDKGetBaseline(b *testing.B) {
	srv := startS3(b)
	size := s3BenchSource(b)
	c := srv.Client()
	ctx := context.Background()
	out := b.TempDir()
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		f, err := os.Create(filepath.Join(out, fmt.Sprintf("out%d.jsonl", i)))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(f)
		lines := 0
		p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String("src/")})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for _, o := range page.Contents {
				res, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lake"), Key: o.Key})
				if err != nil {
					b.Fatal(err)
				}
				var body bytes.Buffer
				_, err = body.ReadFrom(res.Body)
				res.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
				sc := bufio.NewScanner(bytes.NewReader(decompress(b, *o.Key, body.Bytes())))
				for sc.Scan() {
					if len(sc.Bytes()) == 0 {
						continue
					}
					w.Write(sc.Bytes())
					w.WriteByte('\n')
					lines++
				}
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if lines != benchS3Records {
			b.Fatalf("%d lines, want %d", lines, benchS3Records)
		}
	}
	b.ReportMetric(float64(benchS3Records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
