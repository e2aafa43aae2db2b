//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// The S3 rows: file into an object_store s3:// prefix of the in-process
// S3 emulator (positional parts, effectively-once, its put_if_absent
// premise probed at every start), and an s3:// prefix read into positional
// part files.

// countS3 counts the records of every object under lake/orders/ but the
// start-up probe's (one a kill interrupted may be left behind).
func countS3(t *testing.T, c *s3.Client) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[string]int{}
	pages := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String("orders/")})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if strings.HasPrefix(key, "orders/.mqb-probe-") {
				continue
			}
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lake"), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			countIDs(t, key, data, got)
		}
	}
	return got
}

var objectStoreS3Sink = sinkCase{"object_store s3://", effectivelyOnce, true, func(t *testing.T, dir string) (string, []string, func(*testing.T) map[string]int) {
	srv := testsrv.NewS3(t, "lake")
	c := srv.Client()
	return `object_store { url = "s3://lake/orders", path_style = true }`, srv.S3Env(), func(t *testing.T) map[string]int {
		return countS3(t, c)
	}
}}

var objectStoreS3Source = sourceCase{name: "object_store s3://", setup: func(t *testing.T, dir string) sourceSetup {
	srv := testsrv.NewS3(t, "lake")
	c := srv.Client()
	n := 0
	return sourceSetup{from: `object_store { url = "s3://lake/in", path_style = true }`,
		env: srv.S3Env(),
		emit: func(t *testing.T, lines string) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"),
				Key: aws.String("in/" + objectName(n)), Body: strings.NewReader(lines)}); err != nil {
				t.Fatal(fmt.Errorf("put object %s: %w", objectName(n), err))
			}
			n++
		}}
}}
