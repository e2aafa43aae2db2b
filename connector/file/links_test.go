package file

// The glob crash test writes to SQLite, keyed by file and line: the sql
// connector is a package of its own, linked here as connector/all links
// it.
import _ "github.com/mqb-dev/mqb/connector/sql"
