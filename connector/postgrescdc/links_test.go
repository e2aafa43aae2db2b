package postgrescdc

// The routes of this package's tests read from files and write to
// SQLite or to an HTTP endpoint the test serves: the file, sql and http
// connectors are packages of their own, linked here as connector/all
// links them.
import (
	_ "github.com/mqb-dev/mqb/connector/file"
	_ "github.com/mqb-dev/mqb/connector/http"
	_ "github.com/mqb-dev/mqb/connector/sql"
)
