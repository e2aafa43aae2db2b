// Package testsrv starts real servers on 127.0.0.1 for tests: PostgreSQL and
// MariaDB from their Debian packages, an embedded NATS JetStream server, an
// in-process Kafka-protocol broker (franz-go's kfake), an in-process GCS
// emulator (fake-gcs-server), an in-process S3 emulator (gofakes3),
// ClickHouse from Debian's clickhouse-server and Redis from Debian's
// redis-server.
// No mocks: the code under test talks to the real protocol.
//
//	func TestMain(m *testing.M) { testsrv.Main(m) }
//
//	url := testsrv.Postgres(t)        // postgres://postgres@127.0.0.1:P/DB?sslmode=disable
//	dsn := testsrv.MariaDB(t)         // root@tcp(127.0.0.1:P)/DB
//	db := testsrv.MariaDBDatabase(t)  // db.URL: mysql://root@127.0.0.1:P/DB
//	nc := testsrv.NATS(t)             // nats://127.0.0.1:P, JetStream on
//	brokers := testsrv.Kafka(t, "orders:3", "payments")
//	endpoint, client := testsrv.GCS(t, "lake")
//	s3 := testsrv.NewS3(t, "lake")    // s3.Endpoint(), path-style; s3.S3Env()
//	addr := testsrv.ClickHouse(t)     // native protocol, user "default"
//	url := testsrv.Redis(t)           // redis://127.0.0.1:P, append-only file on
//
// Servers that take a while to start (PostgreSQL, MariaDB, ClickHouse) are
// shared by all tests of a test binary; each Postgres/MariaDB call (and
// SharedClickHouse(t).NewDatabase) hands out a fresh database, dropped when
// the test ends, so parallel tests do not see each other's tables. initdb
// and mariadb-install-db output is cached per machine under
// $TMPDIR/mqb-testsrv-cache, so only the first test binary on a machine
// pays for it. The in-process servers are cheap and started per call.
//
// Fault injection: every server has a handle (NewPostgres, NewMariaDB,
// NewClickHouse, NewNATS, NewKafka, NewKafkaProcess, NewGCS, NewS3, NewRedis, or the
// Shared* ones) with Stop, Start and Restart keeping the port and the data,
// and Kill (or Postgres's Crash, an immediate shutdown) for a crash. Start
// returns once the server serves what it had: a RabbitMQ node once a
// durable sentinel queue it declared at its first start is back and
// routes a publish (the node takes connections before it has recovered
// its queues). Each MariaDB server has a temporary directory of its own
// beside its data. Downs
// are the two ways (Stop, Kill) a test of an outage takes one down. Stopping
// a shared server disturbs every test using it: fault tests should use a
// New* server of their own. NewKafkaProcess runs cmd/mqb-testbroker as a
// separate process for tests where the broker must die on its own.
//
// Server processes are forked with a parent-death signal from a thread that
// never exits, so none outlives its test binary, even one killed by a
// timeout; Main also stops them gracefully and removes their files (a later
// test binary removes what a killed one left). .ci/extra.d/testsrv-orphans.sh
// fails CI if a server survives the run.
//
// When a server binary is missing the helper skips the test, naming the
// Debian package to install; with CI=true it fails the test instead.
// .ci/packages lists the packages so that .ci/run installs them. See
// clickhouse.go for what the old ClickHouse 18.16 does not support.
package testsrv
