package testsrv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// RabbitMQ on this machine is Debian's rabbitmq-server 3.10 on Erlang/OTP
// 25. What we met running it by hand:
//
//   - /usr/sbin/rabbitmq-server is a wrapper that switches to the rabbitmq
//     user (whose files our temp dirs are not); /usr/lib/rabbitmq/bin/
//     rabbitmq-server runs as we are.
//   - That script keeps a shell in front of the VM, which would outlive a
//     killed test binary's parent-death signal; RUNNING_UNDER_SYSTEMD
//     makes it exec the VM, so the process we start is beam.smp itself.
//   - The node needs an epmd. Left alone, its start-up forks `epmd
//     -daemon` into a session of its own that nothing stops. We run our
//     own on a free port of 127.0.0.1 (ERL_EPMD_PORT) before the node,
//     as a child we stop with it, under a name in the server's directory
//     (a symlink) so that the orphan check finds it like the node.
//   - Start-up takes 10 to 40 s on a loaded machine; a graceful stop
//     (SIGTERM to the VM) takes a few seconds.
//   - Much of the start-up is loading code: RabbitMQ's own applications
//     sit in its plugins directory beside some 40 optional plugins, all
//     of them on the code path, and each module loaded is looked for in
//     one directory after another. The node gets a plugins directory of
//     its own instead, with links to rabbit and the applications it
//     needs (read from their .app files): no plugin is enabled anyway,
//     and each start takes about 2 s less.
//   - After a restart the node accepts connections before it has
//     recovered its durable queues: for a while a queue that exists is
//     NOT_FOUND and a publish to it (or to one declared meanwhile) can
//     come back NO_ROUTE. So the node counts as ready only once a
//     durable sentinel queue, declared at its first start, is there
//     again and takes a mandatory publish.

// RabbitMQServer is a RabbitMQ node from the Debian rabbitmq-server
// package, run by hand on 127.0.0.1 with its data, logs and config in a
// temp dir. Log in as guest/guest (allowed from the loopback interface).
//
// Stop shuts the node down (SIGTERM, SIGKILL after 20 s), Kill kills it
// (SIGKILL) as a crash would; Start brings it back on the same port and
// data (durable queues and persistent messages survive).
type RabbitMQServer struct {
	procServer
	amqpPort, distPort, epmdPort int
	epmd                         *process
	plugins                      string // RABBITMQ_PLUGINS_DIR; "" for the installed one
	// sentinel is set once the first start declared the sentinel queue;
	// a restart waits for it to be back. sentinelAt is when.
	sentinel   bool
	sentinelAt time.Time
}

// RabbitMetadataFlush is how long after a durable declaration the node
// is sure to have written it out (Mnesia's log keeps writes up to 2 s):
// a node killed sooner may come back without it.
const RabbitMetadataFlush = 2500 * time.Millisecond

// Kill kills the node (SIGKILL), as a crash would, once its sentinel
// queue is sure to be written out (RabbitMetadataFlush).
func (s *RabbitMQServer) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	at := s.sentinelAt
	s.mu.Unlock()
	time.Sleep(time.Until(at.Add(RabbitMetadataFlush)))
	s.procServer.Kill(t)
}

// rabbitSentinel is the durable queue whose recovery tells that a
// restarted node has recovered its queues.
const rabbitSentinel = "testsrv.sentinel"

const (
	rabbitmqInstalled = "/usr/sbin/rabbitmq-server"
	rabbitmqServer    = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	epmdPath          = "/usr/bin/epmd"
)

var sharedRabbit sharedServer[*RabbitMQServer]

// RabbitMQ returns the AMQP URL, amqp://guest:guest@127.0.0.1:PORT/, of the
// RabbitMQ node the test binary shares, starting it on first use. Tests
// sharing it use queues and exchanges of their own names.
func RabbitMQ(t testing.TB) string {
	t.Helper()
	checkRabbitMQ(t)
	return SharedRabbitMQ(t).URL()
}

// SharedRabbitMQ returns the RabbitMQ node the test binary shares, to stop
// and restart in a test of an outage (the tests after it find it running).
func SharedRabbitMQ(t testing.TB) *RabbitMQServer {
	t.Helper()
	checkRabbitMQ(t)
	return sharedRabbit.get(t, "RabbitMQ", "rabbitmq", startRabbitMQ)
}

// NewRabbitMQ starts a RabbitMQ node for this test alone (one to stop and
// restart), stopped and removed when the test ends.
func NewRabbitMQ(t testing.TB) *RabbitMQServer {
	t.Helper()
	checkRabbitMQ(t)
	return startPrivate(t, "RabbitMQ", "rabbitmq-", startRabbitMQ)
}

func checkRabbitMQ(t testing.TB) {
	t.Helper()
	if hidden("rabbitmq") {
		unavailable(t, "rabbitmq-server", "RabbitMQ hidden by %s", HideEnv)
	}
	for _, p := range []string{rabbitmqInstalled, rabbitmqServer, epmdPath} {
		if _, err := os.Stat(p); err != nil {
			unavailable(t, "rabbitmq-server", "RabbitMQ not found: no %s", p)
		}
	}
}

func startRabbitMQ(dir string) (*RabbitMQServer, error) {
	for _, d := range []string{"home", "mnesia", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
		return nil, err
	}
	epmd := filepath.Join(dir, "epmd")
	if err := os.Symlink(epmdPath, epmd); err != nil {
		return nil, err
	}
	plugins, err := rabbitPlugins(filepath.Join(dir, "plugins"))
	if err != nil {
		return nil, err
	}
	s := &RabbitMQServer{plugins: plugins}
	s.procServer = procServer{
		name: "RabbitMQ", dir: dir, logName: "rabbitmq-server.log",
		command: func() (string, []string, error) {
			if err := s.startEPMD(epmd); err != nil {
				return "", nil, err
			}
			return "/usr/bin/env", append(s.env(dir), rabbitmqServer), nil
		},
		ready:        s.ready,
		readyTimeout: 3 * time.Minute,
		stopSignal:   syscall.SIGTERM,
		grace:        20 * time.Second,
		stopped:      s.stopEPMD,
	}
	err = s.startOnFreePorts(3, func(ports []int) error {
		s.amqpPort, s.distPort, s.epmdPort = ports[0], ports[1], ports[2]
		conf := fmt.Sprintf("listeners.tcp.1 = 127.0.0.1:%d\nlog.console = false\nlog.file.level = warning\n", s.amqpPort)
		return os.WriteFile(filepath.Join(dir, "rabbitmq.conf"), []byte(conf), 0o644)
	})
	if err != nil {
		s.stopEPMD()
		return nil, err
	}
	return s, nil
}

// ready succeeds once the node takes connections and has its durable
// queues: at the first start it declares the sentinel queue; after a
// restart the sentinel must be there again (a passive declare) and route
// a mandatory publish, confirmed and not returned. It runs with mu held.
func (s *RabbitMQServer) ready(ctx context.Context) error {
	c, err := amqp.DialConfig(s.URL(), amqp.Config{Dial: amqp.DefaultDial(time.Second)})
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	if !s.sentinel {
		if _, err := ch.QueueDeclare(rabbitSentinel, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare the sentinel queue: %w", err)
		}
		s.sentinel, s.sentinelAt = true, time.Now()
		return nil
	}
	if _, err := ch.QueueDeclarePassive(rabbitSentinel, true, false, false, false, nil); err != nil {
		return fmt.Errorf("the sentinel queue is not back yet: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", rabbitSentinel, true, false, amqp.Publishing{Body: []byte("ready?")})
	if err != nil {
		return err
	}
	if ok, err := dc.WaitContext(ctx); err != nil || !ok {
		return fmt.Errorf("publish to the sentinel queue not confirmed: %v", err)
	}
	select {
	case r := <-returns: // a return comes before its confirm
		return fmt.Errorf("publish to the sentinel queue returned: %d %s", r.ReplyCode, r.ReplyText)
	default:
	}
	_, err = ch.QueuePurge(rabbitSentinel, false)
	return err
}

// env is the node's environment: everything it writes under dir, every
// port on 127.0.0.1.
func (s *RabbitMQServer) env(dir string) []string {
	env := []string{
		"HOME=" + filepath.Join(dir, "home"), // the Erlang cookie
		"RUNNING_UNDER_SYSTEMD=true",
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_EPMD_PORT=" + strconv.Itoa(s.epmdPort),
		"RABBITMQ_NODENAME=mqb" + strconv.Itoa(s.amqpPort) + "@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(s.amqpPort),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(s.distPort),
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_PID_FILE=" + filepath.Join(dir, "rabbitmq.pid"),
	}
	if s.plugins != "" {
		env = append(env, "RABBITMQ_PLUGINS_DIR="+s.plugins)
	}
	return env
}

// rabbitPluginsGlob finds the plugins directory of the installed server,
// which holds rabbit itself and every application it runs on.
const rabbitPluginsGlob = "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins"

// rabbitPlugins makes dir a plugins directory holding links to the
// applications of the installed server's that rabbit needs, and returns
// it; it returns "" (the node uses the package's directory) when the
// installed one is not laid out as expected.
func rabbitPlugins(dir string) (string, error) {
	found, _ := filepath.Glob(rabbitPluginsGlob)
	if len(found) != 1 {
		return "", nil
	}
	apps := rabbitApps(found[0])
	if apps == nil {
		return "", nil
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	for _, app := range apps {
		if err := os.Symlink(filepath.Join(found[0], app), filepath.Join(dir, app)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// appDeps matches the lists of applications an .app file says an
// application needs.
var appDeps = regexp.MustCompile(`\{(?:applications|included_applications|optional_applications),\s*\[([^\]]*)\]`)

// rabbitApps lists the directories (name-version) of pluginsDir that
// rabbit needs, itself included, following each application's .app
// file; the applications not there are OTP's. It returns nil when
// rabbit's or a needed application's .app file cannot be read.
func rabbitApps(pluginsDir string) []string {
	entries, err := os.ReadDir(pluginsDir)
	if err != nil {
		return nil
	}
	dirs := map[string]string{} // application → its directory
	for _, e := range entries {
		if name, _, ok := strings.Cut(e.Name(), "-"); ok && e.IsDir() {
			dirs[name] = e.Name()
		}
	}
	var out []string
	seen := map[string]bool{}
	todo := []string{"rabbit"}
	for len(todo) > 0 {
		app := todo[0]
		todo = todo[1:]
		d, ok := dirs[app]
		if seen[app] || !ok {
			continue
		}
		seen[app] = true
		b, err := os.ReadFile(filepath.Join(pluginsDir, d, "ebin", app+".app"))
		if err != nil {
			return nil
		}
		out = append(out, d)
		for _, m := range appDeps.FindAllSubmatch(b, -1) {
			for _, dep := range strings.Split(string(m[1]), ",") {
				todo = append(todo, strings.Trim(strings.TrimSpace(dep), "'"))
			}
		}
	}
	if !seen["rabbit"] {
		return nil
	}
	return out
}

// startEPMD starts the node's epmd unless it runs; it is called with mu
// held (from command).
func (s *RabbitMQServer) startEPMD(path string) error {
	if s.epmd != nil && s.epmd.running() {
		return nil
	}
	p, err := startProcess(filepath.Join(s.dir, "epmd.log"), nil, path, "-port", strconv.Itoa(s.epmdPort), "-address", "127.0.0.1")
	if err != nil {
		return err
	}
	s.epmd = p
	// The node must find it listening, or it forks an epmd of its own.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.epmdPort))
	return p.waitReady(10*time.Second, func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// stopEPMD stops the node's epmd once the node is down.
func (s *RabbitMQServer) stopEPMD() {
	s.mu.Lock()
	p := s.epmd
	s.mu.Unlock()
	if p != nil {
		p.stop(syscall.SIGTERM, 5*time.Second)
	}
}

// URL is amqp://guest:guest@127.0.0.1:PORT/.
func (s *RabbitMQServer) URL() string {
	return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", s.amqpPort)
}
