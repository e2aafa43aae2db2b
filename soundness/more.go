package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/eclipse/paho.golang/paho"
	amqp "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// The broker sources of issue #18: a Redis stream read by a consumer group
// per route, a RabbitMQ queue per route, an MQTT QoS 1 subscription in a
// persistent session per route, an s3:// prefix of the in-process S3
// emulator, the route's own HTTP server (http_server), fed by clients
// that POST each line until the route answers 2xx, and a MongoDB
// collection read by the mongodb capture source (see mongo.go). Each route
// gets a queue, group or session of its own (two routes competing for one
// queue would split it by timing), so every route reads the whole input;
// the routes over MongoDB each keep their own cursor on one collection.
//
// Redis and the S3 emulator are started per run directory; RabbitMQ and
// Mosquitto are the servers internal/testsrv shares in the process (a node
// takes 10-40 s to start), with queue, topic and client names that carry
// the case's seed, set up afresh for each run directory (runs of one case
// are sequential). The queues, the stream and the topic are fed in chunks
// while the routes run and while they are down; the S3 prefix is filled
// before the first run, and its routes end at the end of the listing.
// The collection is in a database of its own per run directory on the
// FerretDB server internal/testsrv shares, fed in chunks like the queues.
//
// Generating them is opt-in (moreSources): the fixed CI seeds stay as they
// were, and TestMoreSources samples the kinds (SOUNDNESS_SOURCES=all runs
// every one).

const (
	brokerRedis = "redis"
	brokerAMQP  = "amqp"
	brokerMQTT  = "mqtt"
	brokerS3    = "s3"
	brokerHTTP  = "http_server"

	redisURLEnv = "SOUNDNESS_REDIS_URL"
	amqpURLEnv  = "SOUNDNESS_AMQP_URL"
	mqttURLEnv  = "SOUNDNESS_MQTT_URL"
)

// moreKinds are the sources of this file, in the order TestMoreSources
// samples them.
var moreKinds = []string{brokerRedis, brokerAMQP, brokerMQTT, brokerS3, brokerHTTP, brokerMongo}

// moreSources lists the kinds generate may draw for a seed that reads the
// file in consume mode (and no other later source); empty: none.
var moreSources []string

// pickMore chooses, from a stream of its own, whether a case reads one of
// moreSources instead of the file: about a quarter of the seeds that can.
func pickMore(c *Case) {
	if len(moreSources) == 0 || c.Mode != "" || c.Broker != "" {
		return
	}
	r := rand.New(rand.NewPCG(c.Seed, 0x5a1e))
	if r.IntN(100) < 25 {
		c.Broker = moreSources[r.IntN(len(moreSources))]
	}
}

// moreFrom is the `from` block of route reading c's source, or "" when it
// is not one of this file's.
func (c *Case) moreFrom(route string) string {
	env := func(name string) string { return fmt.Sprintf("\"${env(\\\"%s\\\")}\"", name) }
	switch c.Broker {
	case brokerRedis:
		return fmt.Sprintf("redis { url = %s, stream = \"in\", group = %q }", env(redisURLEnv), route)
	case brokerAMQP:
		return fmt.Sprintf("amqp { url = %s, queue = %q, prefetch = 100 }", env(amqpURLEnv), fmt.Sprintf("sound_%d_%s", c.Seed, route))
	case brokerMQTT:
		return fmt.Sprintf("mqtt { url = %s, topic = %q, client_id = %q }", env(mqttURLEnv), c.mqttTopic(), fmt.Sprintf("sound-%d-%s", c.Seed, route))
	case brokerS3:
		return `object_store { url = "s3://lake/in", path_style = true }`
	case brokerHTTP:
		// The port is a placeholder: each run directory's routes.mqb gets
		// free ones (startHTTPClients).
		return fmt.Sprintf("http_server { address = \"127.0.0.1:%d\", path = \"/in\" }", 18080+int(route[len(route)-1]-'a'))
	case brokerMongo:
		return c.mongoFrom()
	}
	return ""
}

func (c *Case) mqttTopic() string { return fmt.Sprintf("sound/%d/in", c.Seed) }

var (
	queueRE    = regexp.MustCompile(`queue\s*=\s*"([^"]+)"`)
	clientIDRE = regexp.MustCompile(`client_id\s*=\s*"([^"]+)"`)
)

// withTB runs f with a testing.TB for testsrv's helpers: a Fatal or Skip
// in it comes back as the error, and what it registered with Cleanup runs
// when the returned stop is called (or at once on an error).
func withTB(what string, f func(tb *harnessTB)) (stop func(), err error) {
	tb := &harnessTB{}
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(tbAbort)
			if !ok {
				panic(r)
			}
			tb.cleanup()
			stop, err = nil, fmt.Errorf("%s: %s", what, a.msg)
		}
	}()
	f(tb)
	return tb.cleanup, nil
}

// startMore starts what the case's source needs for one run directory, or
// returns nil when it is not one of this file's.
func startMore(dir string, c *Case, source string) (*srcHandle, error) {
	switch c.Broker {
	case brokerHTTP:
		return startHTTPClients(dir, source)
	case brokerRedis:
		return startRedisStream(source)
	case brokerAMQP:
		return startAMQPQueues(source)
	case brokerMQTT:
		return startMQTTSessions(c, source)
	case brokerS3:
		return startS3Prefix(c)
	case brokerMongo:
		return startMongoCollection(dir, c, source)
	}
	return nil, nil
}

// serialFeed is a srcHandle's feed that hands write the lines of each
// chunk, one chunk at a time, with a minute to write them.
func serialFeed(write func(ctx context.Context, lines []string) error) func(chunk string) error {
	var mu sync.Mutex
	return func(chunk string) error {
		mu.Lock()
		defer mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return write(ctx, lines(chunk))
	}
}

// startRedisStream starts a Redis server of the run directory's own; each
// line is an entry of stream "in" with the line as its payload field.
// Every route of source reads it through a consumer group of its own.
func startRedisStream(source string) (*srcHandle, error) {
	var srv *testsrv.RedisServer
	stop, err := withTB("Redis for the redis source", func(tb *harnessTB) { srv = testsrv.NewRedis(tb) })
	if err != nil {
		return nil, err
	}
	var groups []string
	for _, m := range redisGroupRE.FindAllStringSubmatch(source, -1) {
		groups = append(groups, m[1])
	}
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	h := &srcHandle{env: []string{redisURLEnv + "=" + srv.URL()}}
	h.feed = serialFeed(func(ctx context.Context, ls []string) error {
		pipe := client.Pipeline()
		for _, l := range ls {
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "in", Values: []any{"payload", l}})
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	h.caughtUp = func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ok, err := redisCaughtUp(ctx, client, "in", groups)
		return err == nil && ok
	}
	h.left = func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return redisLeft(ctx, client, "in", groups)
	}
	h.stop = func() { client.Close(); stop() }
	return h, nil
}

// redisGroupRE finds the consumer group of every redis source of a file
// (moreFrom names it after the route).
var redisGroupRE = regexp.MustCompile(`\bgroup\s*=\s*"([^"]+)"`)

// redisCaughtUp reports whether every group has been delivered the
// stream's last entry and has acknowledged all it was delivered. The
// sinks standing still does not tell it: under load a route may not yet
// have read the whole stream when they have stood still for a second.
func redisCaughtUp(ctx context.Context, c *goredis.Client, stream string, groups []string) (bool, error) {
	st, err := c.XInfoStream(ctx, stream).Result()
	if err != nil {
		return false, err
	}
	infos, err := c.XInfoGroups(ctx, stream).Result()
	if err != nil {
		return false, err
	}
	return groupsCaughtUp(groups, infos, st.Length, st.LastGeneratedID), nil
}

// groupsCaughtUp: every group in want exists, has nothing pending and has
// been delivered the stream's last entry (lastID), or the stream holds
// nothing (length 0).
func groupsCaughtUp(want []string, have []goredis.XInfoGroup, length int64, lastID string) bool {
	for _, name := range want {
		i := slices.IndexFunc(have, func(g goredis.XInfoGroup) bool { return g.Name == name })
		if i < 0 {
			if length > 0 {
				return false
			}
			continue
		}
		if g := have[i]; g.Pending > 0 || length > 0 && streamIDLess(g.LastDeliveredID, lastID) {
			return false
		}
	}
	return true
}

// redisLeft counts, once a run has ended, the entries of stream that the
// routes' groups have still to read: those delivered to a consumer and
// not acknowledged (the group's pending list, which the route's next
// start reads first) and those not yet delivered to the group (after its
// last-delivered id; every entry when the route never created its group,
// which it creates at the stream's beginning). XINFO GROUPS' lag is not
// used: Redis gives none (-1) when it cannot tell, and the ids are exact.
// The drain ends a run when its sinks stand still; what the stream still
// holds for a group was not lost, it was not read.
func redisLeft(ctx context.Context, c *goredis.Client, stream string, groups []string) (int, error) {
	var ids []string
	for start := "-"; ; {
		es, err := c.XRangeN(ctx, stream, start, "+", 1000).Result()
		if err != nil {
			return 0, fmt.Errorf("stream %s: %w", stream, err)
		}
		for _, e := range es {
			ids = append(ids, e.ID)
		}
		if len(es) < 1000 {
			break
		}
		start = "(" + es[len(es)-1].ID
	}
	if len(ids) == 0 {
		return 0, nil // no stream: nothing was fed, nothing is left
	}
	infos, err := c.XInfoGroups(ctx, stream).Result()
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	return groupsBacklog(groups, infos, ids), nil
}

// groupsBacklog sums over the groups in want what each has still to read
// of a stream whose entry ids are ids (in order): its pending entries and
// the entries after its last-delivered id (all of them for a group that
// does not exist).
func groupsBacklog(want []string, have []goredis.XInfoGroup, ids []string) int {
	n := 0
	for _, name := range want {
		last := "0-0"
		if i := slices.IndexFunc(have, func(g goredis.XInfoGroup) bool { return g.Name == name }); i >= 0 {
			n += int(have[i].Pending)
			last = have[i].LastDeliveredID
		}
		after, _ := slices.BinarySearchFunc(ids, last, func(id, last string) int {
			if streamIDLess(last, id) {
				return 1
			}
			return -1
		})
		n += len(ids) - after
	}
	return n
}

// streamIDLess orders stream entry ids ("ms-seq") by number; an id that
// does not parse sorts first.
func streamIDLess(a, b string) bool {
	am, as := parseStreamID(a)
	bm, bs := parseStreamID(b)
	return am < bm || am == bm && as < bs
}

func parseStreamID(id string) (ms, seq uint64) {
	m, s, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(m, 10, 64)
	seq, _ = strconv.ParseUint(s, 10, 64)
	return ms, seq
}

// startAMQPQueues (re)declares the durable queue of every route of source
// on the shared RabbitMQ node, empty; each line is published, persistent
// and under publisher confirms, to every one of them.
func startAMQPQueues(source string) (*srcHandle, error) {
	var url string
	if _, err := withTB("RabbitMQ for the amqp source", func(tb *harnessTB) { url = testsrv.SharedRabbitMQ(tb).URL() }); err != nil {
		return nil, err
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	var queues []string
	for _, m := range queueRE.FindAllStringSubmatch(source, -1) {
		q := m[1]
		queues = append(queues, q)
		if err == nil {
			_, err = ch.QueueDelete(q, false, false, false)
		}
		if err == nil {
			_, err = ch.QueueDeclare(q, true, false, false, false, nil)
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	h := &srcHandle{env: []string{amqpURLEnv + "=" + url}}
	h.feed = serialFeed(func(ctx context.Context, ls []string) error {
		var dcs []*amqp.DeferredConfirmation
		for _, l := range ls {
			for _, q := range queues {
				dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, true, false,
					amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(l)})
				if err != nil {
					return err
				}
				dcs = append(dcs, dc)
			}
		}
		for _, dc := range dcs {
			if ok, err := dc.WaitContext(ctx); !ok || err != nil {
				return fmt.Errorf("RabbitMQ did not confirm a publish of the input: %v", err)
			}
		}
		return nil
	})
	h.caughtUp = func() bool {
		ready, _, err := amqpDepth(url, queues)
		return err == nil && ready == 0
	}
	h.left = func() (int, error) { return amqpLeft(url, queues, 10*time.Second) }
	h.stop = func() {
		for _, q := range queues {
			ch.QueueDelete(q, false, false, false)
		}
		conn.Close()
	}
	return h, nil
}

// amqpDepth sums, over queues, the messages ready for delivery and the
// consumers, from a passive declare of each (on a connection of its own:
// a refused declare closes its channel). Messages delivered and not yet
// acknowledged are in neither count; they are ready again once their
// consumer's channel has closed.
func amqpDepth(url string, queues []string) (ready, consumers int, err error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, 0, err
	}
	for _, q := range queues {
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			return 0, 0, fmt.Errorf("queue %s: %w", q, err)
		}
		ready += st.Messages
		consumers += st.Consumers
	}
	return ready, consumers, nil
}

// amqpLeft counts the messages still in queues once a run has ended:
// it waits (up to wait) until no consumer is left on them, so that what
// the run had been delivered and not acknowledged is back in the queue
// and counted. The drain ends a run when its sinks stand still; under
// load the routes may not yet have read the whole queue then (seed 25094,
// at a load average of 20, ended its last run 2.9 s in with 252 and 170
// records of its two routes not in the sinks): what is still in the queue
// was not lost, it was not read.
func amqpLeft(url string, queues []string, wait time.Duration) (int, error) {
	deadline := time.Now().Add(wait)
	for {
		ready, consumers, err := amqpDepth(url, queues)
		switch {
		case err == nil && consumers == 0:
			return ready, nil
		case time.Now().After(deadline):
			if err == nil {
				err = fmt.Errorf("%d consumers still on the queues %v after the run ended", consumers, wait)
			}
			return ready, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startMQTTSessions makes, on the shared Mosquitto, a fresh persistent
// session for every client id of source, subscribed at QoS 1 to the case's
// topic, so that the broker keeps what is published while no route runs;
// each line is published at QoS 1 (and PUBACKed) to the topic.
func startMQTTSessions(c *Case, source string) (*srcHandle, error) {
	var url string
	if _, err := withTB("Mosquitto for the mqtt source", func(tb *harnessTB) { url = testsrv.SharedMosquitto(tb).URL() }); err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range clientIDRE.FindAllStringSubmatch(source, -1) {
		ids = append(ids, m[1])
		// Clean start drops what an earlier run directory left.
		s, err := mqttConnect(url, m[1], true)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, err = s.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: c.mqttTopic(), QoS: 1}}})
		cancel()
		s.Disconnect(&paho.Disconnect{})
		if err != nil {
			return nil, fmt.Errorf("subscribe %s: %w", m[1], err)
		}
	}
	pub, err := mqttConnect(url, fmt.Sprintf("sound-%d-feed-%x", c.Seed, rand.Uint64()), false)
	if err != nil {
		return nil, err
	}
	h := &srcHandle{env: []string{mqttURLEnv + "=" + url}}
	h.feed = serialFeed(func(ctx context.Context, ls []string) error {
		for _, l := range ls {
			if _, err := pub.Publish(ctx, &paho.Publish{QoS: 1, Topic: c.mqttTopic(), Payload: []byte(l)}); err != nil {
				return err
			}
		}
		return nil
	})
	h.left = func() (int, error) { return mqttLeft(url, c.mqttTopic(), ids, pub, 10*time.Second) }
	h.stop = func() {
		pub.Disconnect(&paho.Disconnect{})
		// End the sessions: nothing of this case stays queued in the broker.
		for _, id := range ids {
			if s, err := mqttConnect(url, id, false); err == nil {
				s.Disconnect(&paho.Disconnect{})
			}
		}
	}
	return h, nil
}

// mqttMarkPrefix begins the payload of the mark mqttLeft publishes after
// the input.
const mqttMarkPrefix = "soundness-end-of-input-"

// mqttLeft counts, once a run has ended, the messages the persistent
// session of every client id in ids still holds for its route: those sent
// to the route and not acknowledged, which the broker sends again when the
// session resumes, and those queued and not yet sent. MQTT has no command
// that asks a broker what a session holds; the session's own client sees
// it, so mqttLeft resumes each session itself (same client id, clean start
// off, acknowledging nothing, so the sessions keep what they hold) and
// counts what it is sent. To know when it has been sent everything, it
// publishes a mark to the topic through pub, the client that published the
// input, after the input: a broker sends the messages of one publisher on
// one topic at one QoS to a subscriber in the order they were published,
// and sends the unacknowledged ones again, first, in their order (MQTT 5,
// 4.4 and 4.6), so a session holds nothing more once its mark has come.
// A session the broker no longer has, or a mark that does not come within
// wait, is an error: what the session held cannot be counted.
func mqttLeft(rawURL, topic string, ids []string, pub *paho.Client, wait time.Duration) (int, error) {
	mark := fmt.Sprintf("%s%x", mqttMarkPrefix, rand.Uint64())
	type held struct {
		mu       sync.Mutex
		payloads [][]byte
		marked   chan struct{}
		once     sync.Once
	}
	var sessions []*paho.Client
	defer func() {
		for _, s := range sessions {
			s.Disconnect(&paho.Disconnect{})
		}
	}()
	hs := make([]*held, len(ids))
	for i, id := range ids {
		h := &held{marked: make(chan struct{})}
		hs[i] = h
		s, present, err := mqttResume(rawURL, id, func(p *paho.Publish) {
			h.mu.Lock()
			h.payloads = append(h.payloads, p.Payload)
			h.mu.Unlock()
			if string(p.Payload) == mark {
				h.once.Do(func() { close(h.marked) })
			}
		})
		if err != nil {
			return 0, err
		}
		if !present {
			// End the empty session this connection made.
			zero := uint32(0)
			s.Disconnect(&paho.Disconnect{Properties: &paho.DisconnectProperties{SessionExpiryInterval: &zero}})
			return 0, fmt.Errorf("the broker has no session for client_id %s", id)
		}
		sessions = append(sessions, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := pub.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: []byte(mark)}); err != nil {
		return 0, fmt.Errorf("publish the end-of-input mark: %w", err)
	}
	n := 0
	for i, h := range hs {
		select {
		case <-h.marked:
		case <-ctx.Done():
			return 0, fmt.Errorf("the session of client_id %s did not deliver the mark published after the input within %v", ids[i], wait)
		}
		h.mu.Lock()
		k, _ := countBeforeMark(h.payloads, mark)
		h.mu.Unlock()
		n += k
	}
	return n, nil
}

// countBeforeMark counts the payloads before mark that are records (the
// marks of earlier counts, which their sessions still hold, are not); it
// reports false when mark is not among them.
func countBeforeMark(payloads [][]byte, mark string) (int, bool) {
	n := 0
	for _, p := range payloads {
		switch {
		case string(p) == mark:
			return n, true
		case !strings.HasPrefix(string(p), mqttMarkPrefix):
			n++
		}
	}
	return n, false
}

// mqttResume connects as clientID with clean start off, keeping the
// session an hour after the connection, and hands onPublish every message
// the broker sends, acknowledging none; it says whether the broker had
// the session.
func mqttResume(rawURL, clientID string, onPublish func(*paho.Publish)) (*paho.Client, bool, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, false, err
	}
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		return nil, false, err
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: clientID, Conn: conn, EnableManualAcknowledgment: true,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			onPublish(pr.Packet)
			return true, nil
		}}})
	expiry, recvMax := uint32(3600), uint16(65535)
	cp := &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: false,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry, ReceiveMaximum: &recvMax}}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ca, err := c.Connect(ctx, cp)
	if err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("MQTT connect as %s: %w", clientID, err)
	}
	return c, ca.SessionPresent, nil
}

// mqttConnect opens an MQTT 5 session as clientID: a persistent one (kept
// for an hour after the connection) when persistent, else one that ends
// with the connection; either starts clean.
func mqttConnect(rawURL, clientID string, persistent bool) (*paho.Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: clientID, Conn: conn})
	cp := &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: true}
	if persistent {
		expiry := uint32(3600)
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &expiry}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, cp); err != nil {
		conn.Close()
		return nil, fmt.Errorf("MQTT connect as %s: %w", clientID, err)
	}
	return c, nil
}

// startS3Prefix starts an S3 emulator of the run directory's own with
// bucket lake, the input put under in/ as objects of a few hundred lines
// each, named in key order.
func startS3Prefix(c *Case) (*srcHandle, error) {
	var srv *testsrv.S3Server
	stop, err := withTB("the S3 emulator for the object_store source", func(tb *harnessTB) { srv = testsrv.NewS3(tb, "lake") })
	if err != nil {
		return nil, err
	}
	client := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, ch := range chunks(c.Input, 2*c.Kills+2) {
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("lake"),
			Key: aws.String(fmt.Sprintf("in/chunk-%05d.jsonl", i)), Body: strings.NewReader(ch)}); err != nil {
			stop()
			return nil, fmt.Errorf("put the input into the S3 emulator: %w", err)
		}
	}
	return &srcHandle{env: srv.S3Env(), stop: stop}, nil
}
