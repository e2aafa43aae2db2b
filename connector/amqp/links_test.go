package amqp

// The routes of this package's tests read from files and write to
// SQLite: the file and sql connectors are packages of their own, linked
// here as connector/all links them.
import (
	_ "github.com/mqb-dev/mqb/connector/file"
	_ "github.com/mqb-dev/mqb/connector/sql"
)
