package checkpoint

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

func TestMain(m *testing.M) { testsrv.Main(m) }

// sqlURLs gives, per server, a function that starts (or shares) it for the
// subtest it is called with: a server that is not installed skips that
// subtest only, never the parent from inside a subtest.
func sqlURLs() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"postgres": func(t *testing.T) string { return testsrv.Postgres(t) },
		"mariadb":  func(t *testing.T) string { return testsrv.MariaDBDatabase(t).URL },
	}
}

// Two handles on one route: the later Load takes the route over, and the
// older handle's Save is refused instead of moving the position back.
func TestSQLStoreFencing(t *testing.T) {
	for name, newURL := range sqlURLs() {
		t.Run(name, func(t *testing.T) {
			url := newURL(t)
			ctx := context.Background()
			old, err := OpenSQL(ctx, url, "instance-a")
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			if _, ok, err := old.Load("orders"); err != nil || ok {
				t.Fatalf("first load: ok %v err %v, want nothing", ok, err)
			}
			p1 := Position{Source: "in.jsonl", NextIndex: 10, Offset: 100}
			if err := old.Save("orders", p1); err != nil {
				t.Fatal(err)
			}
			if err := old.Save("orders", p1); err != nil { // unchanged row: still ours
				t.Fatal(err)
			}
			cur, err := OpenSQL(ctx, url, "instance-b")
			if err != nil {
				t.Fatal(err)
			}
			defer cur.Close()
			got, ok, err := cur.Load("orders")
			if err != nil || !ok || !reflect.DeepEqual(got, p1) {
				t.Fatalf("takeover load: %+v %v %v, want %+v", got, ok, err, p1)
			}
			if cur.Epoch("orders") != old.Epoch("orders")+1 {
				t.Errorf("epochs: old %d, new %d", old.Epoch("orders"), cur.Epoch("orders"))
			}
			err = old.Save("orders", Position{Source: "in.jsonl", NextIndex: 5})
			if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "instance-b") {
				t.Fatalf("stale save: %v, want ErrFenced naming the new owner", err)
			}
			t.Log(err)
			p2 := Position{Source: "in.jsonl", NextIndex: 20, Offset: 200}
			if err := cur.Save("orders", p2); err != nil {
				t.Fatal(err)
			}
			// Another route in the same table is independent.
			if _, ok, err := old.Load("other"); err != nil || ok {
				t.Fatalf("other route: ok %v err %v", ok, err)
			}
			third, err := OpenSQL(ctx, url, "")
			if err != nil {
				t.Fatal(err)
			}
			defer third.Close()
			if got, ok, err := third.Load("orders"); err != nil || !ok || !reflect.DeepEqual(got, p2) {
				t.Fatalf("reload: %+v %v %v, want %+v", got, ok, err, p2)
			}
		})
	}
}

func TestSQLStoreRedactsPassword(t *testing.T) {
	for _, u := range []string{"postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=1", "mysql://u:s3cret@127.0.0.1:1/db?timeout=1s"} {
		_, err := OpenSQL(context.Background(), u, "")
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("err %v: want a connect error without the password", err)
		}
	}
}
