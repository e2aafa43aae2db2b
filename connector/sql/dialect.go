package sql

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/internal/sqlkv"
	"github.com/mqb-dev/mqb/plan"
)

// sqlDialect is the database server a sql endpoint talks to. SQLite has its
// own sink (sink_sql.go); the server dialects share sqlServerSink.
type sqlDialect uint8

const (
	dialectPostgres sqlDialect = iota + 1
	dialectMySQL
)

func (d sqlDialect) String() string {
	switch d {
	case dialectPostgres:
		return "postgres"
	case dialectMySQL:
		return "mysql"
	}
	return "sqlite"
}

// dialectOf names the server dialect of a sql url, or 0 for anything else
// (sqlite://, an unknown scheme: the SQLite sink reports those).
func dialectOf(rawURL string) sqlDialect {
	scheme, _, _ := strings.Cut(rawURL, "://")
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return dialectPostgres
	case "mysql", "mariadb":
		return dialectMySQL
	}
	return 0
}

// placeholder is the n-th (1-based) bound parameter in the dialect's syntax.
func (d sqlDialect) placeholder(n int) string {
	if d == dialectPostgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// mysqlConfig turns mysql://user:pass@host:port/db?param=v into the driver's
// config (query parameters are the driver's DSN parameters). Values are
// interpolated by the driver (escaped, never spliced as text the user
// wrote): one round trip per row instead of a prepare, execute and close.
func mysqlConfig(rawURL string) (*mysql.Config, error) { return sqlkv.MySQLConfig(rawURL) }

// pgConfig parses a postgres:// url, with a connect timeout unless the url
// sets one, and commits that wait for the disk (sqlkv.DurableCommit).
func pgConfig(rawURL string) (*pgconn.Config, error) {
	cfg, err := pgconn.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", plan.RedactURLs(rawURL), plan.RedactURLs(err.Error()))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	sqlkv.DurableCommit(cfg)
	return cfg, nil
}

// sqlErrorKind is how a sink treats a database error.
type sqlErrorKind uint8

const (
	// sqlBatchFatal: the statement or the schema is wrong; retrying the
	// batch cannot help.
	sqlBatchFatal sqlErrorKind = iota
	// sqlRetryable: the connection, a deadlock, a serialization failure, a
	// lock timeout, a server shutting down: the batch was rolled back and
	// may be written again.
	sqlRetryable
	// sqlRowLevel: the row itself is refused (constraint, bad value): that
	// record goes to the DLQ and the rest of the batch is written without it.
	sqlRowLevel
)

// classifyPG sorts a PostgreSQL error by SQLSTATE class. Anything that is
// not a server error (a reset connection, EOF, a dial or read timeout) is
// the transport failing, which a retry on a fresh connection survives.
func classifyPG(err error) sqlErrorKind {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return sqlRetryable
	}
	code := pe.Code
	switch {
	case strings.HasPrefix(code, "22"), // data exception: bad value, out of range
		strings.HasPrefix(code, "23"): // integrity constraint: not null, unique, check, foreign key
		return sqlRowLevel
	case strings.HasPrefix(code, "40"), // 40001 serialization failure, 40P01 deadlock
		strings.HasPrefix(code, "08"),    // connection exception
		strings.HasPrefix(code, "53"),    // insufficient resources (too many connections, disk full)
		strings.HasPrefix(code, "57P"),   // admin/crash shutdown, cannot connect now
		code == "55P03",                  // lock not available (lock_timeout)
		code == "57014",                  // query canceled (statement_timeout)
		code == "58000", code == "58030": // system / I/O error
		return sqlRetryable
	}
	return sqlBatchFatal
}

// MySQL / MariaDB server error numbers.
var (
	mysqlRetryable = map[uint16]bool{
		1040: true,                                     // too many connections
		1053: true,                                     // server shutdown in progress
		1077: true,                                     // normal shutdown
		1079: true,                                     // shutdown complete
		1158: true, 1159: true, 1160: true, 1161: true, // network read/write errors
		1205: true, // lock wait timeout
		1213: true, // deadlock
		1317: true, // query interrupted
		1927: true, // connection killed
		2006: true, // server has gone away
		2013: true, // lost connection during query
		4031: true, // disconnected by the server (idle timeout)
	}
	mysqlRowLevel = map[uint16]bool{
		1048: true,                                     // column cannot be null
		1062: true,                                     // duplicate entry
		1169: true,                                     // unique constraint (ndb)
		1216: true, 1217: true, 1451: true, 1452: true, // foreign key
		1264: true, // out of range
		1265: true, // data truncated
		1292: true, // incorrect value (date, number)
		1364: true, // field has no default value
		1366: true, // incorrect value for a column (type, charset)
		1367: true, // illegal value
		1406: true, // data too long
		1411: true, // incorrect datetime value
		1586: true, // duplicate entry for key
		1690: true, // value out of range
		3140: true, // invalid JSON text
		3819: true, // check constraint violated (MySQL)
		4025: true, // CONSTRAINT failed (MariaDB check)
	}
)

// classifyMySQL sorts a MySQL/MariaDB error by server error number; as for
// PostgreSQL, an error that is not the server's is the transport's.
func classifyMySQL(err error) sqlErrorKind {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return sqlRetryable // driver.ErrBadConn, mysql.ErrInvalidConn, EOF, net errors
	}
	switch {
	case mysqlRowLevel[me.Number]:
		return sqlRowLevel
	case mysqlRetryable[me.Number]:
		return sqlRetryable
	}
	return sqlBatchFatal
}

// txConflict reports whether err is the server rolling the whole
// transaction back to settle a conflict with another transaction: a
// deadlock it broke by choosing this one (PostgreSQL 40P01, InnoDB 1213)
// or a serialization failure (40001). Nothing of the transaction is left,
// and the same writes may well go through a moment later, once the other
// transaction is done: the sink writes the batch again on its own
// (sqlServerSink.Write).
func (d sqlDialect) txConflict(err error) bool {
	if d == dialectPostgres {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

func (d sqlDialect) classify(err error) sqlErrorKind {
	if d == dialectPostgres {
		return classifyPG(err)
	}
	return classifyMySQL(err)
}
