package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A NATS JetStream source: every run directory gets an embedded server of
// its own (JetStream store inside the directory) with stream IN holding
// the input, one message per line, published before the first run. With
// MsgIDs each message carries a Nats-Msg-Id (the line number), the
// producer-stamped identity a route may rely on; without, it carries none.
// Routes read it with their own durable consumer and a short ack_wait, so
// messages in flight at a kill come back soon.

const natsURLEnv = "SOUNDNESS_NATS_URL"

// natsFrom is the `from` block of a route reading the stream.
func natsFrom(route string) string {
	return fmt.Sprintf("nats { url = \"${env(\\\"%s\\\")}\", subject = \"in.records\", stream = \"IN\", durable = %q, ack_wait = 1s }", natsURLEnv, route)
}

// startNATS starts the server of one run directory and fills its stream.
// The returned stop shuts it down.
func startNATS(dir string, c *Case) (env []string, stop func(), err error) {
	opts := &natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(dir, ".nats"), NoLog: true, NoSigs: true}
	srv, err := natsserver.NewServer(opts)
	if err != nil {
		return nil, nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, nil, fmt.Errorf("embedded NATS not ready after 10s")
	}
	stop = func() { srv.Shutdown(); srv.WaitForShutdown() }
	url := fmt.Sprintf("nats://%s", srv.Addr().(*net.TCPAddr).String())
	nc, err := nats.Connect(url)
	if err != nil {
		stop()
		return nil, nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		stop()
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.>"}}); err != nil {
		stop()
		return nil, nil, err
	}
	sc := bufio.NewScanner(strings.NewReader(c.Input))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var futures []jetstream.PubAckFuture
	for i := 0; sc.Scan(); i++ {
		m := nats.NewMsg("in.records")
		m.Data = []byte(sc.Text())
		if c.MsgIDs {
			m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("line-%d", i))
		}
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			stop()
			return nil, nil, err
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		stop()
		return nil, nil, fmt.Errorf("publishing the input to NATS: %w", ctx.Err())
	}
	for _, f := range futures {
		select {
		case err := <-f.Err():
			stop()
			return nil, nil, fmt.Errorf("publish: %w", err)
		default:
		}
	}
	return []string{natsURLEnv + "=" + url}, stop, nil
}

// natsCaughtUp reports whether every route's durable consumer of the
// stream has nothing left: none to deliver, none unacknowledged. That the
// sinks stand still does not tell it: under load a run may wait longer
// than the drain's quiet time for JetStream to redeliver what a killed run
// left unacknowledged (seed-21187, under two other cases' load, ended its
// final run 9 s in, 118 records short, reported as lost).
func natsCaughtUp(url string, durables []string) func() bool {
	return func() bool {
		nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, d := range durables {
			cons, err := js.Consumer(ctx, "IN", d)
			if err != nil {
				return false
			}
			info, err := cons.Info(ctx)
			if err != nil || info.NumPending > 0 || info.NumAckPending > 0 {
				return false
			}
		}
		return true
	}
}

// natsLeft counts, once a run has ended, what every route's durable
// consumer of the stream still has to take: messages not yet delivered
// and delivered ones not acknowledged. A route that never created its
// consumer has the whole stream ahead.
func natsLeft(url string, durables []string) func() (int, error) {
	return func() (int, error) {
		nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
		if err != nil {
			return 0, err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return 0, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stream, err := js.Stream(ctx, "IN")
		if err != nil {
			return 0, err
		}
		n := 0
		for _, d := range durables {
			cons, err := stream.Consumer(ctx, d)
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				si, err := stream.Info(ctx)
				if err != nil {
					return 0, err
				}
				n += int(si.State.Msgs)
				continue
			}
			if err != nil {
				return 0, err
			}
			info, err := cons.Info(ctx)
			if err != nil {
				return 0, err
			}
			n += int(info.NumPending) + info.NumAckPending
		}
		return n, nil
	}
}
