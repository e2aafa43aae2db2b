// Package sqlkv is the connection the shared state stores (dedup keys,
// checkpoints) keep to a postgres:// or mysql:// server: one connection for
// PostgreSQL (pgx), redialled when the server drops it, and a small
// database/sql pool for MySQL/MariaDB. Errors never carry the url's
// password.
package sqlkv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/plan"
)

// Dialect is the server kind.
type Dialect uint8

const (
	Postgres Dialect = iota + 1
	MySQL
)

// IsURL reports whether url names a server store rather than a Pebble
// directory.
func IsURL(u string) bool { return dialectOf(u) != 0 }

func dialectOf(u string) Dialect {
	scheme, _, _ := strings.Cut(u, "://")
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return Postgres
	case "mysql", "mariadb":
		return MySQL
	}
	return 0
}

// DB is a connection to the store's server.
type DB struct {
	Dialect Dialect
	// URL is the url with its password redacted, for errors.
	URL string

	mu    sync.Mutex
	pgCfg *pgx.ConnConfig
	pg    *pgx.Conn

	my *sql.DB
}

// Open connects to a postgres:// or mysql:// url.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	d := &DB{Dialect: dialectOf(rawURL), URL: plan.RedactURLs(rawURL)}
	switch d.Dialect {
	case Postgres:
		cfg, err := pgx.ParseConfig(rawURL)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", d.URL, plan.RedactURLs(err.Error()))
		}
		if cfg.ConnectTimeout == 0 {
			cfg.ConnectTimeout = 10 * time.Second
		}
		DurableCommit(&cfg.Config)
		d.pgCfg = cfg
		if _, err := d.pgConn(ctx); err != nil {
			return nil, err
		}
	case MySQL:
		cfg, err := MySQLConfig(rawURL)
		if err != nil {
			return nil, err
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", d.URL, plan.RedactURLs(err.Error()))
		}
		d.my = sql.OpenDB(conn)
		d.my.SetMaxOpenConns(4)
		if err := d.my.PingContext(ctx); err != nil {
			d.my.Close()
			return nil, fmt.Errorf("connect to %s: %s", d.URL, plan.RedactURLs(err.Error()))
		}
	default:
		return nil, fmt.Errorf("%s: not a postgres:// or mysql:// url", d.URL)
	}
	return d, nil
}

// MySQLConfig turns mysql://user:pass@host:port/db?param=v into the
// driver's config; query parameters are the driver's DSN parameters.
func MySQLConfig(rawURL string) (*mysql.Config, error) {
	red := plan.RedactURLs(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", red, plan.RedactURLs(err.Error()))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%s: want mysql://user:password@host:3306/database", red)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	c := mysql.NewConfig()
	if u.User != nil {
		c.User = u.User.Username()
		c.Passwd, _ = u.User.Password()
	}
	c.Net, c.Addr, c.DBName = "tcp", host, strings.TrimPrefix(u.Path, "/")
	if c.DBName == "" {
		return nil, fmt.Errorf("%s: no database in the url path", red)
	}
	if u.RawQuery != "" {
		// Let the driver parse its own parameters.
		parsed, err := mysql.ParseDSN("tcp(" + host + ")/" + c.DBName + "?" + u.RawQuery)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", red, plan.RedactURLs(err.Error()))
		}
		parsed.User, parsed.Passwd = c.User, c.Passwd
		c = parsed
	}
	c.InterpolateParams = true
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 60 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 60 * time.Second
	}
	return c, nil
}

func (d *DB) pgConn(ctx context.Context) (*pgx.Conn, error) {
	if d.pg != nil && !d.pg.IsClosed() {
		return d.pg, nil
	}
	c, err := pgx.ConnectConfig(ctx, d.pgCfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %s", d.URL, plan.RedactURLs(err.Error()))
	}
	d.pg = c
	return c, nil
}

// Tx runs fn in a transaction on the PostgreSQL connection or a MySQL
// one, retrying the whole transaction a few times when the connection
// drops or the server reports a deadlock or serialization failure.
func (d *DB) Tx(ctx context.Context, fn func(q Querier) error) error {
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt*attempt) * 50 * time.Millisecond)
		}
		err = d.tx(ctx, fn)
		if err == nil || !Transient(err) {
			return err
		}
	}
	return err
}

func (d *DB) tx(ctx context.Context, fn func(q Querier) error) error {
	if d.Dialect == Postgres {
		d.mu.Lock()
		defer d.mu.Unlock()
		c, err := d.pgConn(ctx)
		if err != nil {
			return err
		}
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		if err := fn(pgQuerier{tx}); err != nil {
			tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}
	tx, err := d.my.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(myQuerier{tx}); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Querier runs statements inside a transaction.
type Querier interface {
	Exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	// Query calls row for each result row; row scans it with scan.
	Query(ctx context.Context, query string, row func(scan func(dest ...any) error) error, args ...any) error
}

type pgQuerier struct{ tx pgx.Tx }

func (q pgQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (q pgQuerier) Query(ctx context.Context, query string, row func(scan func(dest ...any) error) error, args ...any) error {
	rows, err := q.tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return eachRow(rows, row)
}

type myQuerier struct{ tx *sql.Tx }

func (q myQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q myQuerier) Query(ctx context.Context, query string, row func(scan func(dest ...any) error) error, args ...any) error {
	rows, err := q.tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return eachRow(rows, row)
}

// resultRows is what pgx.Rows and *sql.Rows share.
type resultRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// eachRow calls row for every row of rows.
func eachRow(rows resultRows, row func(scan func(dest ...any) error) error) error {
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Transient reports whether err is worth a new attempt: the connection,
// a deadlock, a serialization failure, a lock timeout.
func Transient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		c := pe.Code
		return strings.HasPrefix(c, "40") || strings.HasPrefix(c, "08") || strings.HasPrefix(c, "57P") || c == "55P03"
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1205, 1213, 1053, 1927, 2006, 2013, 4031:
			return true
		}
		return false
	}
	var fe *FencedError
	if errors.As(err, &fe) {
		return false
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// CreateTable runs a CREATE TABLE IF NOT EXISTS. PostgreSQL can fail two
// of them racing (two instances starting at once) with a unique violation
// on its catalog: the table then exists, and a second try says so.
func (d *DB) CreateTable(ctx context.Context, ddl string) error {
	var err error
	for range 3 {
		err = d.Tx(ctx, func(q Querier) error { _, err := q.Exec(ctx, ddl); return err })
		if !CreateRace(err) {
			return err
		}
	}
	return err
}

// CreateRace reports whether err is PostgreSQL losing a race between two
// CREATE … IF NOT EXISTS of one object: a unique violation on its catalog
// (23505), the relation (42P07), or the table's row type (42710), which
// is created first.
func CreateRace(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42710")
}

// FencedError is a write refused because another owner took over.
type FencedError struct{ Msg string }

func (e *FencedError) Error() string { return e.Msg }

// Close closes the connection.
func (d *DB) Close() error {
	if d.my != nil {
		return d.my.Close()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return d.pg.Close(ctx)
	}
	return nil
}

// Redact makes a driver error safe to show.
func (d *DB) Redact(err error) string { return plan.RedactURLs(err.Error()) }
