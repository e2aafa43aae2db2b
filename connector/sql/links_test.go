package sql

// The routes of this package's tests read from files: the file source is
// a connector of its own, linked here as connector/all links it.
import _ "github.com/mqb-dev/mqb/connector/file"
