package testsrv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// MosquittoServer is an MQTT broker from the Debian mosquitto package
// (2.0, MQTT 3.1.1 and 5), run by hand on 127.0.0.1 with its config and
// persistence file in a temp dir, anonymous clients allowed.
//
// Stop shuts it down (SIGTERM: it writes its persistence file, so
// persistent sessions and their queued QoS 1 messages survive), Kill
// kills it (SIGKILL: what it saved last, within a second, survives);
// Start brings it back on the same port and data.
type MosquittoServer struct {
	procServer
	port int
}

const mosquittoPath = "/usr/sbin/mosquitto"

var sharedMosquitto sharedServer[*MosquittoServer]

// Mosquitto returns the URL, mqtt://127.0.0.1:PORT, of the broker the test
// binary shares, starting it on first use. Tests sharing it use topics
// and client ids of their own.
func Mosquitto(t testing.TB) string {
	t.Helper()
	return SharedMosquitto(t).URL()
}

// SharedMosquitto returns the broker the test binary shares, to stop and
// restart in a test of an outage.
func SharedMosquitto(t testing.TB) *MosquittoServer {
	t.Helper()
	if hidden("mosquitto") {
		unavailable(t, "mosquitto", "Mosquitto hidden by %s", HideEnv)
	}
	if _, err := os.Stat(mosquittoPath); err != nil {
		unavailable(t, "mosquitto", "Mosquitto not found: no %s", mosquittoPath)
	}
	return sharedMosquitto.get(t, "Mosquitto", "mosquitto", startMosquitto)
}

func startMosquitto(dir string) (*MosquittoServer, error) { return startMosquittoConf(dir, "") }

// NewMosquittoACL starts a broker for this test alone whose clients are
// held to the access list acl (mosquitto's acl_file syntax; the lines
// before any "user" line apply to every client, anonymous ones included).
// An MQTT 5 client publishing at QoS 1 to a topic it may not write gets a
// PUBACK with reason 0x87 (not authorized). Stopped when the test ends.
func NewMosquittoACL(t testing.TB, acl string) *MosquittoServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(path, []byte(acl), 0o644); err != nil {
		t.Fatal(err)
	}
	return NewMosquittoConf(t, "acl_file "+path+"\n")
}

// NewMosquittoVolatile starts a broker for this test alone that keeps
// nothing across a restart (persistence false): after Stop or Kill and
// Start, every session, subscription and queued message is gone, as from
// a broker run without persistence. Stopped when the test ends.
func NewMosquittoVolatile(t testing.TB) *MosquittoServer {
	t.Helper()
	return NewMosquittoConf(t, "persistence false\n")
}

// NewMosquittoConf starts a broker for this test alone with the lines
// conf after this package's configuration, which they override (one
// with "max_queued_messages 1000", Mosquitto's default, drops a client's
// QoS 1 messages past the 1000 it queues). Stopped when the test ends.
func NewMosquittoConf(t testing.TB, conf string) *MosquittoServer {
	t.Helper()
	if hidden("mosquitto") {
		unavailable(t, "mosquitto", "Mosquitto hidden by %s", HideEnv)
	}
	if _, err := os.Stat(mosquittoPath); err != nil {
		unavailable(t, "mosquitto", "Mosquitto not found: no %s", mosquittoPath)
	}
	return startPrivate(t, "Mosquitto", "mosquitto-conf-", func(dir string) (*MosquittoServer, error) {
		return startMosquittoConf(dir, conf)
	})
}

// startMosquittoConf starts a broker in dir with extra appended to its
// configuration.
func startMosquittoConf(dir, extra string) (*MosquittoServer, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "mosquitto.conf")
	s := &MosquittoServer{}
	s.procServer = procServer{
		name: "Mosquitto", dir: dir, logName: "mosquitto.log",
		command: func() (string, []string, error) {
			return mosquittoPath, []string{"-c", conf}, nil
		},
		ready: func(ctx context.Context) error {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", s.port))
			if err != nil {
				return err
			}
			return c.Close()
		},
		readyTimeout: 30 * time.Second,
		stopSignal:   syscall.SIGTERM,
		grace:        10 * time.Second,
	}
	err := s.startOnFreePorts(1, func(ports []int) error {
		s.port = ports[0]
		// user root: run as root, mosquitto would otherwise switch to the
		// mosquitto user, who cannot write the temp dir.
		c := fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
user root
persistence true
persistence_location %s/
autosave_interval 1
max_queued_messages 0
max_inflight_messages 0
log_dest stderr
log_type error
log_type warning
%s`, s.port, filepath.Join(dir, "data"), extra)
		return os.WriteFile(conf, []byte(c), 0o644)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// URL is mqtt://127.0.0.1:PORT.
func (s *MosquittoServer) URL() string { return fmt.Sprintf("mqtt://127.0.0.1:%d", s.port) }
