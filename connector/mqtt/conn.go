package mqtt

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/mqb-dev/mqb/plan"
)

// connect dials the broker of rawURL and opens an MQTT 5 session; cfg's
// Conn and ClientID are filled in here.
func connect(ctx context.Context, rawURL string, cfg paho.ClientConfig, cp *paho.Connect) (*paho.Client, error) {
	c, _, err := connectAck(ctx, rawURL, cfg, cp)
	return c, err
}

// connectAck is connect that also returns the broker's CONNACK, which
// says whether it still had the client's session (SessionPresent).
func connectAck(ctx context.Context, rawURL string, cfg paho.ClientConfig, cp *paho.Connect) (*paho.Client, *paho.Connack, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "mqtt" || u.Host == "" {
		return nil, nil, fmt.Errorf("url %s: want mqtt://host:port", plan.RedactURLs(rawURL))
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "1883")
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", plan.RedactURLs(rawURL), err)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		conn = &bufferedConn{TCPConn: tcp, r: bufio.NewReaderSize(tcp, 64<<10)}
	}
	cfg.Conn = conn
	cfg.ClientID = cp.ClientID
	c := paho.NewClient(cfg)
	if u.User != nil {
		cp.Username, cp.UsernameFlag = u.User.Username(), true
		if pw, ok := u.User.Password(); ok {
			cp.Password, cp.PasswordFlag = []byte(pw), true
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ca, err := c.Connect(cctx, cp)
	if err != nil {
		conn.Close()
		if ca != nil {
			return nil, nil, fmt.Errorf("connect to %s: %w (reason %d %s)", plan.RedactURLs(rawURL), err, ca.ReasonCode, ca.Properties.ReasonString)
		}
		return nil, nil, fmt.Errorf("connect to %s: %w", plan.RedactURLs(rawURL), err)
	}
	return c, ca, nil
}

// bufferedConn reads through a buffer: the client reads each packet's
// fixed header a byte at a time and then its body, three or more read
// calls a message that the buffer turns into one system call per
// buffer's worth. Writes go to the connection as they are (embedded, so
// net.Buffers still writes a packet's parts in one writev).
type bufferedConn struct {
	*net.TCPConn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
