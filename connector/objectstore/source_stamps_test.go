package objectstore

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
)

// overwrite writes data under name at url whether or not an object is
// there, as an export job writing over yesterday's object does.
func overwrite(t *testing.T, rawURL, name string, data []byte) {
	t.Helper()
	switch st := openTestStore(t, rawURL).(type) {
	case *dirStore:
		if err := os.WriteFile(filepath.Join(st.root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	case *s3Store:
		if _, err := st.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(st.prefix + name), Body: bytes.NewReader(data)}); err != nil {
			t.Fatal(err)
		}
	case *gcsStore:
		q := url.Values{"uploadType": {"media"}, "name": {st.prefix + name}}
		req, err := http.NewRequest(http.MethodPost, st.api.objectsURL(true, st.name, "", q), bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := st.api.do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	default:
		t.Fatalf("no overwrite for %T", st)
	}
}

// TestObjectStoreSourceObjectWrittenBehind: objects a and b are read to
// their end; then a is written again with other records, as a daily export
// corrected in place. The next run passed over it (the route had read
// past a) and ended 0 with the new records never read. Now it is refused,
// naming the object, reading nothing; and likewise for an object added
// under a key before the last one read in place of one deleted, which
// the count of objects behind the cursor does not see. On a GCS emulator,
// a local directory and an S3 emulator.
func TestObjectStoreSourceObjectWrittenBehind(t *testing.T) {
	for _, u := range objectSourceURLs(t) {
		t.Run(strings.SplitN(u, ":", 2)[0], func(t *testing.T) {
			e := plantest.NewEnv(t)
			st := openTestStore(t, u)
			for _, o := range []struct{ name, ids string }{{"a.jsonl", "a1 a2"}, {"b.jsonl", "b1 b2"}} {
				if _, err := st.PutIfAbsent(context.Background(), o.name, orderLines(o.ids), ""); err != nil {
					t.Fatal(err)
				}
			}
			if rs := runRoute(t, objectSourcePlan(e, u, 16, 1), "lake"); rs.In != 4 {
				t.Fatalf("first run read %d, want 4", rs.In)
			}
			time.Sleep(1100 * time.Millisecond) // S3 gives LastModified in seconds
			overwrite(t, u, "a.jsonl", orderLines("a3 a4"))
			refused := func(names ...string) {
				t.Helper()
				runtest.RunRefused(t, objectSourcePlan(e, u, 16, 1), names)
				if n := runtest.CountRows(t, e.DB); n != 4 {
					t.Errorf("the refused run left %d rows, want 4", n)
				}
			}
			refused(`"a.jsonl"`, "was written after the route had read past it", "mqbc state reset")

			// Under another prefix: a and c read; a deleted and b added,
			// the count at or before c unchanged.
			u2 := u + "2"
			e2 := plantest.NewEnv(t)
			st2 := openTestStore(t, u2)
			for _, o := range []struct{ name, ids string }{{"a.jsonl", "a1"}, {"c.jsonl", "c1"}} {
				if _, err := st2.PutIfAbsent(context.Background(), o.name, orderLines(o.ids), ""); err != nil {
					t.Fatal(err)
				}
			}
			if rs := runRoute(t, objectSourcePlan(e2, u2, 16, 1), "lake"); rs.In != 2 {
				t.Fatalf("first run under %s read %d, want 2", u2, rs.In)
			}
			time.Sleep(1100 * time.Millisecond)
			deleteObject(t, u2, "a.jsonl")
			if _, err := st2.PutIfAbsent(context.Background(), "b.jsonl", orderLines("b1"), ""); err != nil {
				t.Fatal(err)
			}
			runtest.RunRefused(t, objectSourcePlan(e2, u2, 16, 1), []string{`"b.jsonl"`, "was written after the route had read past it"})
		})
	}
}

// deleteObject removes name at url.
func deleteObject(t *testing.T, rawURL, name string) {
	t.Helper()
	switch st := openTestStore(t, rawURL).(type) {
	case *dirStore:
		if err := os.Remove(filepath.Join(st.root, name)); err != nil {
			t.Fatal(err)
		}
	case *s3Store:
		if _, err := st.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(st.prefix + name)}); err != nil {
			t.Fatal(err)
		}
	case *gcsStore:
		req, err := http.NewRequest(http.MethodDelete, st.api.objectsURL(false, st.name, st.prefix+name, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := st.api.do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	default:
		t.Fatalf("no delete for %T", st)
	}
}

// orderLines is a JSON line per id of ids (space-separated).
func orderLines(ids string) []byte {
	var b strings.Builder
	for i, id := range strings.Fields(ids) {
		b.WriteString(`{"order_id": "` + id + `", "amount": ` + string(rune('1'+i)) + `, "body": "x"}` + "\n")
	}
	return []byte(b.String())
}
