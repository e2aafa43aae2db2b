package plan

import (
	"net/url"
	"strings"
)

// SameDatabase reports whether two sql urls name one database on one
// server as one user: the same dialect (postgres:// or postgresql://,
// mysql:// or mariadb://), host, port (5432 and 3306 when unset), database
// and user. Passwords and other parameters do not matter. A url that does
// not parse, or names no server dialect, is never the same database.
//
// It is the condition of the transactional outbox: the runtime turns the
// outbox on with it, and the compiler proves a route exactly-once with it,
// so the two cannot disagree.
func SameDatabase(a, b string) bool {
	da, okA := databaseOf(a)
	db, okB := databaseOf(b)
	return okA && okB && da == db
}

type database struct {
	dialect, host, port, name, user string
}

// databaseOf is the identity of the database a postgres:// or mysql:// url
// names. A postgres url may move host, port, dbname and user into its
// query string, as libpq allows.
func databaseOf(raw string) (database, bool) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return database{}, false
	}
	var d database
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		d.dialect, d.port = "postgres", "5432"
	case "mysql", "mariadb":
		d.dialect, d.port = "mysql", "3306"
	default:
		return database{}, false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return database{}, false
	}
	d.host = strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" {
		d.port = p
	}
	d.name = strings.TrimPrefix(u.Path, "/")
	if u.User != nil {
		d.user = u.User.Username()
	}
	if d.dialect == "postgres" {
		q := u.Query()
		if strings.Contains(u.Host, ",") {
			// Several hosts: compare the list as written.
			d.host = strings.ToLower(u.Host)
		}
		for key, dst := range map[string]*string{"host": &d.host, "port": &d.port, "dbname": &d.name, "user": &d.user} {
			if v := q.Get(key); v != "" {
				*dst = v
				if key == "host" {
					*dst = strings.ToLower(v)
				}
			}
		}
	} else if d.host == "" || d.name == "" {
		return database{}, false
	}
	return d, true
}
