package testsrv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
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
// proxy into $TMPDIR/mqb-testsrv-cache (about a minute with nothing
// downloaded yet, seconds with the module and build caches warm) and later
// ones reuse the binary. MQB_FERRETDB names a ferretdb binary to use
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
//   - No change streams, no transactions, no replica set: a capture
//     (change-stream) source cannot be tested against it.
const ferretDBVersion = "v1.24.2"

// MongoServer is a FerretDB server with its SQLite backend, run on
// 127.0.0.1 with its data in a temp dir.
type MongoServer struct {
	dir  string
	bin  string
	port int

	mu   sync.Mutex
	proc *process
	seq  int
}

var (
	sharedMongoOnce sync.Once
	sharedMongo     *MongoServer
	sharedMongoErr  error
)

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
	bin := ferretDBBinary(t)
	sharedMongoOnce.Do(func() {
		var dir string
		if dir, sharedMongoErr = rootDir(); sharedMongoErr != nil {
			return
		}
		sharedMongo, sharedMongoErr = startMongo(bin, filepath.Join(dir, "ferretdb"))
		if sharedMongoErr == nil {
			atExit(sharedMongo.shutdown)
		}
	})
	if sharedMongoErr != nil {
		t.Fatalf("testsrv: start FerretDB: %v", sharedMongoErr)
	}
	return sharedMongo
}

// NewMongoDB starts a MongoDB-protocol server for this test alone, stopped
// and removed when the test ends.
func NewMongoDB(t testing.TB) *MongoServer {
	t.Helper()
	s, err := startMongo(ferretDBBinary(t), privateDir(t, "ferretdb-"))
	if err != nil {
		t.Fatalf("testsrv: start FerretDB: %v", err)
	}
	t.Cleanup(s.shutdown)
	return s
}

var (
	ferretOnce sync.Once
	ferretBin  string
	ferretErr  error
)

// ferretDBBinary returns the ferretdb binary, building it on first use.
func ferretDBBinary(t testing.TB) string {
	t.Helper()
	ferretOnce.Do(func() {
		if p := os.Getenv("MQB_FERRETDB"); p != "" {
			ferretBin = p
			return
		}
		var dir string
		dir, ferretErr = templateDir(versionKey("ferretdb", ferretDBVersion, runtime.Version()), buildFerretDB)
		ferretBin = filepath.Join(dir, "ferretdb")
	})
	if ferretErr != nil {
		msg := fmt.Sprintf("build FerretDB %s (a MongoDB-protocol server) with go from the module proxy: %v", ferretDBVersion, ferretErr)
		if os.Getenv("CI") == "true" {
			t.Fatal("testsrv: " + msg)
		}
		t.Skip("testsrv: " + msg + " (set MQB_FERRETDB to a ferretdb binary to use instead)")
	}
	return ferretBin
}

// buildFerretDB builds cmd/ferretdb of the pinned version into dir.
func buildFerretDB(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil && os.Getenv("GOROOT") != "" {
		goBin, err = filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
	}
	if err != nil {
		return err
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
	run := func(wd string, args ...string) ([]byte, error) {
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = wd, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out, nil
	}
	out, err := run(dir, "mod", "download", "-json", "github.com/FerretDB/FerretDB@"+ferretDBVersion)
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
	if _, err := run(src, "build", "-trimpath", "-o", filepath.Join(dir, "ferretdb"), "./cmd/ferretdb"); err != nil {
		return err
	}
	return os.RemoveAll(src)
}

func startMongo(bin, dir string) (*MongoServer, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	s := &MongoServer{dir: dir, bin: bin}
	err := onFreePorts(func(ports []int) error {
		s.port = ports[0]
		return s.start()
	}, 1)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *MongoServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && s.proc.running() {
		return nil
	}
	p, err := startProcess(filepath.Join(s.dir, "ferretdb.log"), nil, s.bin,
		"--handler=sqlite",
		"--sqlite-url=file:"+filepath.Join(s.dir, "data")+"/",
		"--state-dir="+s.dir,
		fmt.Sprintf("--listen-addr=127.0.0.1:%d", s.port),
		"--debug-addr=-", // its default, 127.0.0.1:8088, is one port for all servers
		"--telemetry=disable",
		"--log-level=warn")
	if err != nil {
		return err
	}
	s.proc = p
	return p.waitReady(30*time.Second, func(ctx context.Context) error {
		c, err := mongo.Connect(options.Client().ApplyURI(s.DSN()).SetServerSelectionTimeout(time.Second))
		if err != nil {
			return err
		}
		defer c.Disconnect(context.Background())
		return c.Ping(ctx, nil)
	})
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
	s.mu.Lock()
	s.seq++
	name := dbName(t, s.seq)
	s.mu.Unlock()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := mongo.Connect(options.Client().ApplyURI(s.DSN()))
		if err != nil {
			return
		}
		defer c.Disconnect(ctx)
		c.Database(name).Drop(ctx)
	})
	return Database{Name: name, URL: s.DSN() + "/" + name, DSN: s.DSN()}
}

// Stop shuts the server down gracefully, keeping its port and data.
func (s *MongoServer) Stop(t testing.TB) {
	t.Helper()
	s.stop(syscall.SIGTERM)
}

// Kill SIGKILLs the server, as a crash would; the next Start reopens its
// SQLite files.
func (s *MongoServer) Kill(t testing.TB) {
	t.Helper()
	s.stop(syscall.SIGKILL)
}

// Start starts a stopped server on the same port with the same data.
func (s *MongoServer) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("testsrv: start FerretDB: %v", err)
	}
}

// Restart is Stop then Start.
func (s *MongoServer) Restart(t testing.TB) {
	t.Helper()
	s.Stop(t)
	s.Start(t)
}

func (s *MongoServer) stop(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		p.stop(sig, 5*time.Second)
	}
}

func (s *MongoServer) shutdown() {
	s.stop(syscall.SIGTERM)
	os.RemoveAll(s.dir)
}
