package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// What a drained run left in its source, for the sources whose progress
// the harness reads itself: a Kafka topic (kafkaRoutes) and a file
// followed in group_subscribe mode (fileLeft). The other brokers' counts
// live beside their sources (more.go, nats.go).

// kafkaRoutes follows how far a run directory's routes have consumed topic
// "in". A route with a group_id commits its offsets to the broker's group;
// one without keeps them in its checkpoint, which the harness reads
// through the running mqbc's mqb_committed_records metric and, once the
// process has ended, from the checkpoint store in the directory. Sinks
// standing still do not tell that a route has consumed everything: a run
// after a kill may wait seconds before it reads (a group member's session
// to expire, the killed run's reservations in a shared dedup store), and
// a drain that stops it then leaves records in the topic, which are not
// lost.
type kafkaRoutes struct {
	dir          string
	client       *kafka.Client
	parts        int
	groups       []string // routes whose offsets the broker's group keeps
	checkpointed []string // routes whose offsets their checkpoint keeps
	metricsAddr  string   // the running mqbc's metrics, when some route is checkpointed
}

// ends is the end offset of every partition of topic "in".
func (k kafkaRoutes) ends(ctx context.Context) (map[int]int64, error) {
	var reqs []kafka.OffsetRequest
	for p := range k.parts {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	lo, err := k.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{"in": reqs}})
	if err != nil {
		return nil, err
	}
	end := map[int]int64{}
	for _, po := range lo.Topics["in"] {
		if po.Error != nil {
			return nil, po.Error
		}
		end[po.Partition] = po.LastOffset
	}
	if len(end) != k.parts {
		return nil, fmt.Errorf("end offsets of %d partitions of %d", len(end), k.parts)
	}
	return end, nil
}

// groupBehind is, per group, the records of topic "in" after its committed
// offsets.
func (k kafkaRoutes) groupBehind(ctx context.Context, end map[int]int64) (map[string]int64, error) {
	ids := make([]int, k.parts)
	for p := range ids {
		ids[p] = p
	}
	behind := map[string]int64{}
	for _, g := range k.groups {
		of, err := k.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: g, Topics: map[string][]int{"in": ids}})
		if err != nil {
			return nil, err
		}
		if errors.Is(of.Error, kafka.GroupIdNotFound) { // the route never joined: nothing committed
			for _, e := range end {
				behind[g] += e
			}
			continue
		}
		if of.Error != nil {
			return nil, of.Error
		}
		left := maps.Clone(end) // a partition the answer leaves out has nothing committed
		for _, po := range of.Topics["in"] {
			if po.Error != nil {
				return nil, po.Error
			}
			left[po.Partition] = end[po.Partition] - max(po.CommittedOffset, 0) // -1: nothing committed
		}
		for _, n := range left {
			behind[g] += n
		}
	}
	return behind, nil
}

// caughtUp reports whether every route has committed the end of every
// partition, as far as the broker and the running mqbc tell.
func (k kafkaRoutes) caughtUp() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	end, err := k.ends(ctx)
	if err != nil {
		return false
	}
	behind, err := k.groupBehind(ctx, end)
	if err != nil {
		return false
	}
	for _, n := range behind {
		if n > 0 {
			return false
		}
	}
	if len(k.checkpointed) == 0 {
		return true
	}
	var total int64
	for _, e := range end {
		total += e
	}
	body, ok := fetchMetrics(k.metricsAddr)
	if !ok {
		return false
	}
	for _, r := range k.checkpointed {
		// An mqbc from before the metric (a -mqbc binary being compared)
		// tells nothing: the sinks standing still decide, as they did.
		if n, ok := metricValue(body, "mqb_committed_records", r); ok && int64(n) < total {
			return false
		}
	}
	return true
}

// left counts, once mqbc has ended, the records of topic "in" some route
// has not committed: after its group's offsets, or after its checkpoint.
func (k kafkaRoutes) left() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	end, err := k.ends(ctx)
	if err != nil {
		return 0, err
	}
	behind, err := k.groupBehind(ctx, end)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, b := range behind {
		n += b
	}
	if len(k.checkpointed) == 0 {
		return int(n), nil
	}
	st, err := checkpoint.Open(filepath.Join(k.dir, ".mqb", "state"))
	if err != nil {
		return 0, err
	}
	defer st.Close()
	for _, r := range k.checkpointed {
		pos, ok, err := st.Load(r)
		if err != nil {
			return 0, err
		}
		for p, e := range end {
			var next int64
			switch {
			case !ok:
			case len(pos.Partitions) > 0:
				next = pos.Partitions[int32(p)]
			case p == 0:
				next = int64(pos.NextIndex) // one partition: the position is its next offset
			}
			n += max(e-next, 0)
		}
	}
	return int(n), nil
}

// fileLeft counts, once a run of a file followed in group_subscribe mode
// has ended, the lines of in.jsonl after each route's committed byte
// offset: what the run had not read and committed when it was stopped.
func fileLeft(dir string, routes []string) func() (int, error) {
	return func() (int, error) {
		data, err := os.ReadFile(filepath.Join(dir, "in.jsonl"))
		if err != nil {
			return 0, err
		}
		st, err := checkpoint.Open(filepath.Join(dir, ".mqb", "state"))
		if err != nil {
			return 0, err
		}
		defer st.Close()
		n := 0
		for _, r := range routes {
			pos, ok, err := st.Load(r)
			if err != nil {
				return 0, err
			}
			from := int64(0)
			if ok {
				from = min(max(pos.Offset, 0), int64(len(data)))
			}
			n += bytes.Count(data[from:], []byte("\n"))
		}
		return n, nil
	}
}
