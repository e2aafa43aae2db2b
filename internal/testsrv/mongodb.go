package testsrv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// MongoDB here is FerretDB v1 (a MongoDB wire-protocol server written in
// Go) on its embedded SQLite backend: there is no MongoDB in Debian.
// FerretDB is not a dependency of ours, so it is not in go.mod: the first
// test binary on a machine builds the pinned version from the Go module
// proxy into $TMPDIR/mqb-testsrv-cache (under two minutes on 2 cores with
// empty module and build caches, seconds with them warm) and later ones
// reuse the binary. MQB_FERRETDB names a ferretdb binary to use
// instead.
//
// `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2` builds a
// binary that panics at start-up: the module lacks the generated
// build/version/version.txt. So the helper copies the module's source out
// of the module cache, writes that file, and builds cmd/ferretdb there
// with FerretDB's own go.sum.
//
// What we met using it with go.mongodb.org/mongo-driver/v2 (v2.10):
//
//   - Unordered insertMany, the unique _id index and its duplicate-key
//     write errors (code 11000, one per document, with the document's
//     index), find and countDocuments behave as MongoDB's.
//   - Integer, double, string and binary subtype 4 (UUID) _ids round-trip.
//   - A document over 16 MiB is accepted (MongoDB refuses it).
//   - No decimal128: a document holding one makes the server drop the
//     connection ("invalid BSON type wirebson.Decimal128").
//   - A graceful stop waits a few seconds for open client connections.
//   - No change streams, no transactions, no replica set: a capture
//     (change-stream) source cannot be tested against it.
const ferretDBVersion = "v1.24.2"

// MongoServer is a FerretDB server with its SQLite backend, run on
// 127.0.0.1 with its data in a temp dir.
type MongoServer struct {
	procServer // dir holds data/, state.json and ferretdb.log
	port       int
}

var sharedMongo sharedServer[*MongoServer]

// MongoDB returns a fresh database on the MongoDB-protocol server the test
// binary shares: URL mongodb://127.0.0.1:PORT/DB, DSN mongodb://127.0.0.1:PORT
// (the driver's form), Name the database. It is dropped when the test ends.
func MongoDB(t testing.TB) Database {
	t.Helper()
	return SharedMongoDB(t).NewDatabase(t)
}

// SharedMongoDB returns the MongoDB-protocol server the test binary shares,
// starting it on first use.
func SharedMongoDB(t testing.TB) *MongoServer {
	t.Helper()
	bin := ferretDBTool.binary(t)
	return sharedMongo.get(t, "FerretDB", "ferretdb", func(dir string) (*MongoServer, error) {
		return startMongo(bin, dir)
	})
}

// NewMongoDB starts a MongoDB-protocol server for this test alone, stopped
// and removed when the test ends.
func NewMongoDB(t testing.TB) *MongoServer {
	t.Helper()
	bin := ferretDBTool.binary(t)
	return startPrivate(t, "FerretDB", "ferretdb-", func(dir string) (*MongoServer, error) {
		return startMongo(bin, dir)
	})
}

// ferretDBTool is FerretDB built from the module proxy, or MQB_FERRETDB.
var ferretDBTool = &goTool{
	name: "ferretdb", what: "a MongoDB-protocol server, FerretDB", version: ferretDBVersion, env: "MQB_FERRETDB",
	build: buildFerretDB,
}

// buildFerretDB builds cmd/ferretdb of the pinned version into dir.
func buildFerretDB(dir string) error {
	out, err := goCommand(dir, "mod", "download", "-json", "github.com/FerretDB/FerretDB@"+ferretDBVersion)
	if err != nil {
		return err
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return fmt.Errorf("go mod download: %w", err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return fmt.Errorf("go mod download: %s", mod.Error)
	}
	src := filepath.Join(dir, "src")
	if err := copyTree(mod.Dir, src); err != nil {
		return err
	}
	if out, err := exec.Command("chmod", "-R", "u+w", src).CombinedOutput(); err != nil {
		return fmt.Errorf("chmod: %w: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(src, "build", "version", "version.txt"), []byte(ferretDBVersion+"\n"), 0o644); err != nil {
		return err
	}
	if _, err := goCommand(src, "build", "-trimpath", "-o", filepath.Join(dir, "ferretdb"), "./cmd/ferretdb"); err != nil {
		return err
	}
	return os.RemoveAll(src)
}

func startMongo(bin, dir string) (*MongoServer, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	s := &MongoServer{}
	s.procServer = procServer{
		name: "FerretDB", dir: dir, logName: "ferretdb.log",
		command: func() (string, []string, error) {
			return bin, []string{
				"--handler=sqlite",
				"--sqlite-url=file:" + filepath.Join(dir, "data") + "/",
				"--state-dir=" + dir,
				fmt.Sprintf("--listen-addr=127.0.0.1:%d", s.port),
				"--debug-addr=-", // its default, 127.0.0.1:8088, is one port for all servers
				"--telemetry=disable",
				"--log-level=warn",
			}, nil
		},
		ready: func(ctx context.Context) error {
			c, err := mongo.Connect(options.Client().ApplyURI(s.DSN()).SetServerSelectionTimeout(time.Second))
			if err != nil {
				return err
			}
			defer c.Disconnect(context.Background())
			return c.Ping(ctx, nil)
		},
		readyTimeout: 30 * time.Second,
		stopSignal:   syscall.SIGTERM,
		grace:        5 * time.Second,
	}
	err := s.startOnFreePorts(1, func(ports []int) error {
		s.port = ports[0]
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Port is the server's TCP port on 127.0.0.1; it stays the same across
// Stop and Start.
func (s *MongoServer) Port() int { return s.port }

// DSN is mongodb://127.0.0.1:PORT, for the driver.
func (s *MongoServer) DSN() string { return fmt.Sprintf("mongodb://127.0.0.1:%d", s.port) }

// NewDatabase names a database no other test uses, dropped when the test
// ends (MongoDB creates a database on its first write).
func (s *MongoServer) NewDatabase(t testing.TB) Database {
	t.Helper()
	name := s.newDatabase(t, func(context.Context, string) error { return nil },
		func(ctx context.Context, name string) error {
			c, err := mongo.Connect(options.Client().ApplyURI(s.DSN()))
			if err != nil {
				return err
			}
			defer c.Disconnect(ctx)
			return c.Database(name).Drop(ctx)
		})
	return Database{Name: name, URL: s.DSN() + "/" + name, DSN: s.DSN()}
}
