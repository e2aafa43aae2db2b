package httpserver

// The routes of this package's tests write to SQLite and to files, and
// call an HTTP endpoint from a request: those connectors are packages of
// their own, linked here as connector/all links them.
import (
	_ "github.com/mqb-dev/mqb/connector/file"
	_ "github.com/mqb-dev/mqb/connector/http"
	_ "github.com/mqb-dev/mqb/connector/sql"
	_ "github.com/mqb-dev/mqb/connector/structural"
)
