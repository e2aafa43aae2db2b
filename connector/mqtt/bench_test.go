package mqtt

import (
	"context"
	"log/slog"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

const benchRecords = 20000

// BenchmarkMQTTSink: file → id → mqtt, QoS 1 publishes, 256 of a batch
// of 1024 waiting for their PUBACK at a time.
func BenchmarkMQTTSink(b *testing.B) {
	url := testsrv.Mosquitto(b)
	input, size := plantest.BenchInput(b, benchRecords)
	runtest.Bench(b, benchRecords, size, func(i int, state string) plan.Plan {
		return plantest.SinkPlan(input, state, 1024, plan.Node{Kind: "mqtt", Attrs: map[string]plan.Value{
			"url": plantest.Str(url), "topic": plantest.Str("bench/sink")}})
	})
}

// BenchmarkMQTTClientPublish is the baseline of BenchmarkMQTTSink: the Go
// client alone publishing as many QoS 1 messages, 256 in flight.
func BenchmarkMQTTClientPublish(b *testing.B) {
	url := testsrv.Mosquitto(b)
	c := client(b, url, nil)
	body := []byte(`{"order_id":"o-00000","amount":12345,"note":"a benchmark order with some padding to look like a real one"}`)
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		sem := make(chan struct{}, inFlight)
		for range benchRecords {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if _, err := c.Publish(context.Background(), &paho.Publish{QoS: 1, Topic: "bench/client", Payload: body}); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkMQTTSourceToSQLite: mqtt (QoS 1, PUBACK after commit) → SQLite
// (ON CONFLICT (id) DO NOTHING), from a persistent session the broker
// queued the orders for, until the table has them all.
func BenchmarkMQTTSourceToSQLite(b *testing.B) {
	url := testsrv.Mosquitto(b)
	pub := client(b, url, nil)
	opts := runtime.Options{Logger: slog.New(slog.DiscardHandler)}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		topic, id := "bench/source", "mqb-bench-"+string(rune('a'+i%26))
		createSession(b, url, id, topic)
		publishOrders(b, pub, topic, 0, benchRecords, false)
		db := filepath.Join(b.TempDir(), "orders.db")
		b.StartTimer()
		bg := runtest.Start(context.Background(), sqlitePlan(url, topic, id, db, 1024), opts)
		if !plantest.WaitFor(func() bool { return runtest.CountRows(b, db) == benchRecords }, 5*time.Minute, 5*time.Millisecond) {
			b.Fatalf("%d rows after 5 minutes, want %d", runtest.CountRows(b, db), benchRecords)
		}
		bg.Stop(b)
		b.StopTimer()
		createSession(b, url, id, topic) // the session, emptied, ends with the next clean start
		b.StartTimer()
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkMQTTClientConsume is the baseline of
// BenchmarkMQTTSourceToSQLite: the Go client alone receiving as many
// QoS 1 messages from its persistent session (acknowledged as received),
// writing nothing.
func BenchmarkMQTTClientConsume(b *testing.B) {
	url := testsrv.Mosquitto(b)
	pub := client(b, url, nil)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		topic, id := "bench/consume", "mqb-bench-consume-"+string(rune('a'+i%26))
		createSession(b, url, id, topic)
		publishOrders(b, pub, topic, 0, benchRecords, false)
		b.StartTimer()
		done := make(chan struct{})
		var n int
		recvMax := uint16(65535)
		c, err := connect(context.Background(), url, paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(paho.PublishReceived) (bool, error) {
				if n++; n == benchRecords {
					close(done)
				}
				return true, nil
			}}}, &paho.Connect{ClientID: id, KeepAlive: 30, Properties: &paho.ConnectProperties{ReceiveMaximum: &recvMax}})
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("received %d of %d", n, benchRecords)
		}
		c.Disconnect(&paho.Disconnect{})
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkMosquittoPub is the native baseline of BenchmarkMQTTSink:
// mosquitto_pub (Debian mosquitto-clients) publishing the same input's
// lines at QoS 1, one message per line.
func BenchmarkMosquittoPub(b *testing.B) {
	bin, err := exec.LookPath("mosquitto_pub")
	if err != nil {
		b.Skip("mosquitto_pub not installed (Debian mosquitto-clients)")
	}
	u, _ := neturl.Parse(testsrv.Mosquitto(b))
	input, size := plantest.BenchInput(b, benchRecords)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		f, err := os.Open(input)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "-h", u.Hostname(), "-p", u.Port(), "-V", "mqttv5", "-q", "1", "-t", "bench/native", "-l")
		cmd.Stdin = f
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("mosquitto_pub: %v\n%s", err, out)
		}
		f.Close()
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
