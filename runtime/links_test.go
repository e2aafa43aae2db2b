package runtime_test

// The engine's tests run routes that read and write files and SQLite: the
// file and sql connectors are packages of their own, which package runtime
// cannot import and its external tests can, as connector/all links them.
import (
	_ "github.com/mqb-dev/mqb/connector/file"
	_ "github.com/mqb-dev/mqb/connector/sql"
)
