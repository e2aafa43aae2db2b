package testsrv_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// Parallel tests share one server per kind and each get their own
// database.
func TestParallelDatabases(t *testing.T) {
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c, err := pgx.Connect(ctx, testsrv.Postgres(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			if _, err := c.Exec(ctx, `CREATE TABLE t (i int)`); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("mysql", testsrv.MariaDB(t))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`CREATE TABLE t (i int)`); err != nil {
				t.Fatal(err)
			}
		})
	}
}
