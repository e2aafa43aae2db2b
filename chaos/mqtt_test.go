//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// mqttClient connects to the broker at rawURL as clientID; clean is
// clean start, and without it the session outlives the connection.
func mqttClient(t *testing.T, rawURL, clientID string, clean bool, onMsg func(*paho.Publish)) *paho.Client {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	cfg := paho.ClientConfig{ClientID: clientID, Conn: conn}
	if onMsg != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			onMsg(pr.Packet)
			return true, nil
		}}
	}
	c := paho.NewClient(cfg)
	expiry := uint32(3600)
	cp := &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: clean}
	if !clean {
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &expiry}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, cp); err != nil {
		t.Fatal(err)
	}
	return c
}

func mqttSubscribe(t *testing.T, c *paho.Client, topic string) {
	t.Helper()
	if _, err := c.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
}

// mqttSource is a QoS 1 subscription in a persistent session, created
// before the first run so the broker queues all the input for it.
var mqttSource = sourceCase{name: "mqtt", follows: true, setup: func(t *testing.T, dir string) sourceSetup {
	url := testsrv.Mosquitto(t)
	s := mqttClient(t, url, "chaos-route", false, nil)
	mqttSubscribe(t, s, "chaos/in")
	s.Disconnect(&paho.Disconnect{})
	pub := mqttClient(t, url, "chaos-pub", true, nil)
	t.Cleanup(func() { pub.Disconnect(&paho.Disconnect{}) })
	return sourceSetup{from: fmt.Sprintf(`mqtt { url = %q, topic = "chaos/in", client_id = "chaos-route" }`, url),
		emit: func(t *testing.T, lines string) {
			for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
				if _, err := pub.Publish(context.Background(), &paho.Publish{QoS: 1, Topic: "chaos/in", Payload: []byte(l)}); err != nil {
					t.Fatal(err)
				}
			}
		}}
}}

// mqttSink publishes to a topic a subscriber of the test counts.
var mqttSink = sinkCase{"mqtt", atLeastOnce, false, func(t *testing.T, dir string) (string, []string, func(*testing.T) map[string]int) {
	url := testsrv.Mosquitto(t)
	var mu sync.Mutex
	got := map[string]int{}
	sub := mqttClient(t, url, "chaos-sub", true, func(p *paho.Publish) {
		mu.Lock()
		countIDs(t, "topic chaos/out", p.Payload, got)
		mu.Unlock()
	})
	t.Cleanup(func() { sub.Disconnect(&paho.Disconnect{}) })
	mqttSubscribe(t, sub, "chaos/out")
	return fmt.Sprintf(`mqtt { url = %q, topic = "chaos/out" }`, url), nil, func(t *testing.T) map[string]int {
		time.Sleep(time.Second) // the last PUBACKed messages on their way to the subscriber
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(got)
	}
}}
