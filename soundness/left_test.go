//go:build soundness

package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// What a Kafka run directory's routes left in topic "in": a grouped
// route's group offsets and a checkpointed route's checkpoint, read from
// the broker and the directory's checkpoint store once the run ended, and
// the running mqbc's mqb_committed_records while it runs.
func TestKafkaLeft(t *testing.T) {
	dir := t.TempDir()
	source := `route left_a {
  from kafka { url = "${env(\"SOUNDNESS_KAFKA_URL\")}", topic = "in", group_id = "left_a" }
}
route left_b {
  from kafka { url = "${env(\"SOUNDNESS_KAFKA_URL\")}", topic = "in" }
}
`
	h, err := startKafka(dir, &Case{Partitions: 2}, source)
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	if len(h.args) != 2 || h.args[0] != "--metrics-addr" {
		t.Fatalf("args %q: want the metrics address for the checkpointed route", h.args)
	}
	if n, err := h.left(); n != 0 || err != nil {
		t.Errorf("left before anything was fed: %d, %v; want 0", n, err)
	}
	var lines string
	for i := range 10 {
		lines += fmt.Sprintf(`{"id":"k-%d"}`+"\n", i)
	}
	if err := h.feed(lines); err != nil {
		t.Fatal(err)
	}
	// Nothing committed: both routes have all 10 ahead.
	if n, err := h.left(); n != 20 || err != nil {
		t.Errorf("left with nothing committed: %d, %v; want 20", n, err)
	}
	client := &kafka.Client{Addr: kafka.TCP(addrOf(h)), Timeout: 5 * time.Second}
	end := map[int]int64{}
	lo, err := client.ListOffsets(t.Context(), &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{"in": {kafka.LastOffsetOf(0), kafka.LastOffsetOf(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, po := range lo.Topics["in"] {
		end[po.Partition] = po.LastOffset
	}
	if end[0]+end[1] != 10 || end[0] == 0 || end[1] == 0 {
		t.Fatalf("end offsets %v: want 10 records over both partitions", end)
	}
	// The group commits partition 0 whole and one record of partition 1;
	// the checkpoint covers partition 1 whole.
	if _, err := client.OffsetCommit(t.Context(), &kafka.OffsetCommitRequest{GroupID: "left_a", GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{"in": {{Partition: 0, Offset: end[0]}, {Partition: 1, Offset: 1}}}}); err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.Open(filepath.Join(dir, ".mqb", "state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Save("left_b", checkpoint.Position{Source: "kafka:in", Mode: "partitions", Partitions: map[int32]int64{1: end[1]}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if n, err := h.left(); n != int(end[1]-1+end[0]) || err != nil {
		t.Errorf("left: %d, %v; want %d (the group's partition 1 after offset 1, the checkpoint's partition 0)", n, err, end[1]-1+end[0])
	}
	if h.caughtUp() {
		t.Errorf("caught up with the group behind")
	}
	// While mqbc runs, the checkpointed route's progress is its metric.
	if _, err := client.OffsetCommit(t.Context(), &kafka.OffsetCommitRequest{GroupID: "left_a", GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{"in": {{Partition: 1, Offset: end[1]}}}}); err != nil {
		t.Fatal(err)
	}
	var committed atomic.Int64
	committed.Store(9)
	ln, err := net.Listen("tcp", h.args[1])
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "mqb_committed_records{route=%q} %d\n", "left_b", committed.Load())
	})}
	go srv.Serve(ln)
	defer srv.Close()
	if h.caughtUp() {
		t.Errorf("caught up with the checkpointed route at 9 of 10")
	}
	committed.Store(10)
	if !h.caughtUp() {
		t.Errorf("not caught up with the group and the route at the end")
	}
}

// addrOf is the broker address a Kafka srcHandle hands mqbc.
func addrOf(h *srcHandle) string {
	for _, e := range h.env {
		if v, ok := strings.CutPrefix(e, kafkaURLEnv+"="); ok {
			first, _, _ := strings.Cut(v, ",")
			return first
		}
	}
	return ""
}

// What a run of a file followed in group_subscribe mode left: the lines
// after each route's committed byte offset (all of them for a route that
// committed nothing).
func TestFileLeft(t *testing.T) {
	dir := t.TempDir()
	lines := "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n{\"id\":4}\n{\"id\":5}\n"
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.Open(filepath.Join(dir, ".mqb", "state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Save("a", checkpoint.Position{Source: "in.jsonl", Mode: "group_subscribe", NextIndex: 2, Offset: int64(2 * len("{\"id\":1}\n"))}); err != nil {
		t.Fatal(err)
	}
	if err := st.Save("b", checkpoint.Position{Source: "in.jsonl", Mode: "group_subscribe", NextIndex: 5, Offset: int64(len(lines))}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if n, err := fileLeft(dir, []string{"a", "b", "c"})(); n != 3+0+5 || err != nil {
		t.Errorf("left: %d, %v; want 8 (a 3 lines behind, b at the end, c never committed)", n, err)
	}
}
