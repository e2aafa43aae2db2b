// Package testsrv starts real servers on 127.0.0.1 for tests: PostgreSQL and
// MariaDB from their Debian packages, an embedded NATS JetStream server, an
// in-process Kafka-protocol broker (franz-go's kfake), an in-process GCS
// emulator (fake-gcs-server) and ClickHouse from Debian's clickhouse-server.
//
// Servers that take a while to start (PostgreSQL, MariaDB, ClickHouse) are
// shared by every test of a test binary and hand each caller a fresh
// database; the cheap in-process ones are started per call. Every server
// process is forked with a parent-death signal, so none outlives its test
// binary; use Main from TestMain to also stop them gracefully and remove
// their files:
//
//	func TestMain(m *testing.M) { testsrv.Main(m) }
//
// When a server's binary is missing the helper skips the test, naming the
// Debian package to install; with CI=true it fails the test instead.
// .ci/packages lists the packages so .ci/run installs them.
package testsrv
