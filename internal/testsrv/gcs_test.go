package testsrv_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

func TestGCS(t *testing.T) {
	start := time.Now()
	endpoint, client := testsrv.GCS(t, "lake")
	t.Logf("GCS emulator ready in %s: %s", time.Since(start), endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket := client.Bucket("lake")

	// Object stores write once with a does-not-exist precondition and
	// treat "exists" as success: the second write must fail with 412.
	put := func(name, body string) error {
		w := bucket.Object(name).If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
		if _, err := io.WriteString(w, body); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	}
	if err := put("orders/2026/part-0001.json", `{"id":1}`); err != nil {
		t.Fatal(err)
	}
	err := put("orders/2026/part-0001.json", `{"id":2}`)
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) || gerr.Code != http.StatusPreconditionFailed {
		t.Fatalf("second conditional write: %v, want a 412", err)
	}
	if err := put("orders/2026/part-0002.json", `{"id":3}`); err != nil {
		t.Fatal(err)
	}
	if err := put("other/x.json", `{}`); err != nil {
		t.Fatal(err)
	}

	r, err := bucket.Object("orders/2026/part-0001.json").NewReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(body) != `{"id":1}` {
		t.Fatalf("read %q, %v", body, err)
	}

	var names []string
	it := bucket.Objects(ctx, &storage.Query{Prefix: "orders/"})
	for {
		a, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, a.Name)
	}
	if len(names) != 2 || names[0] != "orders/2026/part-0001.json" || names[1] != "orders/2026/part-0002.json" {
		t.Fatalf("listed %q", names)
	}
}

// Code that only honours STORAGE_EMULATOR_HOST (storage.NewClient(ctx)
// with no options) reaches the emulator too, reads included.
func TestGCSEmulatorHost(t *testing.T) {
	srv := testsrv.NewGCS(t, "lake")
	t.Setenv("STORAGE_EMULATOR_HOST", srv.EmulatorHost())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := storage.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	w := client.Bucket("lake").Object("a.txt").NewWriter(ctx)
	io.WriteString(w, "hello")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := srv.Client(t).Bucket("lake").Object("a.txt").NewReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	r2, err := client.Bucket("lake").Object("a.txt").NewReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if b, err := io.ReadAll(r2); err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
}

func TestGCSRestart(t *testing.T) {
	srv := testsrv.NewGCS(t, "lake")
	client := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := client.Bucket("lake").Object("a.txt").NewWriter(ctx)
	io.WriteString(w, "kept")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := client.Bucket("lake").Object("a.txt").Attrs(short)
	cancelShort()
	if err == nil {
		t.Fatal("reached a stopped emulator")
	}
	srv.Start(t)
	r, err := client.Bucket("lake").Object("a.txt").NewReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "kept" {
		t.Fatalf("read %q, %v", b, err)
	}
	// A large object goes through a resumable upload, whose session URL
	// the emulator hands out: it must point back at the emulator.
	big := make([]byte, 20<<20)
	w = client.Bucket("lake").Object("big.bin").NewWriter(ctx)
	w.ChunkSize = 8 << 20
	if _, err := w.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if a, err := client.Bucket("lake").Object("big.bin").Attrs(ctx); err != nil || a.Size != int64(len(big)) {
		t.Fatalf("big object: %v, %v", a, err)
	}
}
