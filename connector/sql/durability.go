package sql

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/plan"
)

// The sink counts a record delivered once its batch's commit returns, so
// the verdict holds through a crash of the database server only if a
// commit the server answered is on its disk. Each session asks for that
// where it can (PostgreSQL's synchronous_commit, sqlkv.DurableCommit);
// what only the server's configuration decides is read at start-up and
// warned about, as the redis sink does for appendfsync.

// warnVolatilePG warns when PostgreSQL runs with fsync = off: a crash of
// its machine (not of the server process, whose writes the kernel still
// holds) can then lose commits it answered, or corrupt the database.
func (s *sqlServerSink) warnVolatilePG(ctx context.Context, conn *pgconn.PgConn) {
	res, err := conn.Exec(ctx, "SHOW fsync").ReadAll()
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		s.log.Warn("sql sink: could not read the server's fsync setting; a batch counts as delivered once its commit returns", "url", s.url)
		return
	}
	if v := string(res[0].Rows[0][0]); v != "on" {
		s.log.Warn("sql sink: the PostgreSQL server runs with fsync = "+v+": a crash of its machine can lose commits it answered, which the route counted as delivered; set fsync = on",
			"url", s.url)
	}
}

// warnVolatileMySQL warns when InnoDB answers a commit before its log is
// on disk: innodb_flush_log_at_trx_commit 0 loses up to a second of
// commits in a crash of the server, 2 in a crash of its machine.
func (s *sqlServerSink) warnVolatileMySQL(ctx context.Context) {
	var v string
	if err := s.my.QueryRowContext(ctx, "SELECT @@global.innodb_flush_log_at_trx_commit").Scan(&v); err != nil {
		s.log.Warn("sql sink: could not read the server's innodb_flush_log_at_trx_commit; a batch counts as delivered once its commit returns",
			"url", s.url, "err", plan.RedactURLs(err.Error()))
		return
	}
	if v != "1" {
		s.log.Warn("sql sink: the server runs with innodb_flush_log_at_trx_commit = "+v+": it answers a commit before its log is on disk, and a crash (with 2, of its machine) loses up to a second of commits the route counted as delivered; set it to 1",
			"url", s.url)
	}
}
