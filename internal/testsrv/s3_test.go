package testsrv_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

func putIfAbsent(ctx context.Context, c *s3.Client, key, body string) error {
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String(key),
		Body: strings.NewReader(body), IfNoneMatch: aws.String("*")})
	return err
}

func status(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// The emulator honours If-None-Match: * on PutObject (the put-if-absent
// the object_store sink's premise needs): a second write of one name is
// refused with 412 and the first body stays; listings are in key order.
// With IgnoreIfNoneMatch it behaves as a server without conditional
// writes and replaces the object.
func TestS3(t *testing.T) {
	srv := testsrv.NewS3(t, "lake")
	c := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := putIfAbsent(ctx, c, "orders/b.json", `{"id":1}`); err != nil {
		t.Fatal(err)
	}
	if err := putIfAbsent(ctx, c, "orders/b.json", `{"id":2}`); status(err) != http.StatusPreconditionFailed {
		t.Fatalf("second conditional write: %v, want a 412", err)
	}
	if err := putIfAbsent(ctx, c, "orders/a.json", `{"id":3}`); err != nil {
		t.Fatal(err)
	}
	if err := putIfAbsent(ctx, c, "other/x.json", `{}`); err != nil {
		t.Fatal(err)
	}
	read := func(key string) string {
		t.Helper()
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read("orders/b.json"); got != `{"id":1}` {
		t.Fatalf("read %q after a refused second write", got)
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("lake"), Prefix: aws.String("orders/")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range l.Contents {
		names = append(names, aws.ToString(o.Key))
	}
	if strings.Join(names, " ") != "orders/a.json orders/b.json" {
		t.Fatalf("listed %q", names)
	}

	srv.IgnoreIfNoneMatch(true)
	if err := putIfAbsent(ctx, c, "orders/b.json", `{"id":4}`); err != nil {
		t.Fatalf("write ignoring If-None-Match: %v", err)
	}
	if got := read("orders/b.json"); got != `{"id":4}` {
		t.Fatalf("read %q, want the object replaced", got)
	}
}

func TestS3Restart(t *testing.T) {
	srv := testsrv.NewS3(t, "lake")
	c := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"), Key: aws.String("a.txt"), Body: bytes.NewReader([]byte("kept"))}); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := c.HeadObject(short, &s3.HeadObjectInput{Bucket: aws.String("lake"), Key: aws.String("a.txt")})
	cancelShort()
	if err == nil {
		t.Fatal("reached a stopped emulator")
	}
	srv.Start(t)
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("lake"), Key: aws.String("a.txt")})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	if b, _ := io.ReadAll(out.Body); string(b) != "kept" {
		t.Fatalf("read %q", b)
	}
}
