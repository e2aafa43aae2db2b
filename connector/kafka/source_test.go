package kafka

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// produceOrders writes n records {"order_id":"o-i","amount":i} to topic,
// keyed by order id, so they spread over the partitions.
func produceOrders(t testing.TB, brokers, topic string, from, n int) {
	t.Helper()
	produceOrdersKeyed(t, brokers, topic, "", from, n)
}

// produceOrdersKeyed is produceOrders with keyPrefix before each message
// key (so a second copy of an order can land on another partition).
func produceOrdersKeyed(t testing.TB, brokers, topic, keyPrefix string, from, n int) {
	t.Helper()
	w := &kafkago.Writer{Addr: kafkago.TCP(strings.Split(brokers, ",")...), Topic: topic,
		Balancer: &kafkago.Hash{}, RequiredAcks: kafkago.RequireAll, BatchSize: 1000, BatchTimeout: time.Millisecond}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	msgs := make([]kafkago.Message, 0, 1000)
	for i := from; i < from+n; i++ {
		msgs = append(msgs, kafkago.Message{Key: []byte(fmt.Sprintf("%so-%d", keyPrefix, i)),
			Value: []byte(fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i))})
		if len(msgs) == cap(msgs) || i == from+n-1 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
}

// kafkaSQLitePlan is kafka → sqlite, keyed on the payload's order id, with
// the record's provenance and message_id kept beside it.
func kafkaSQLitePlan(brokers, topic, group, state, db string, batch, concurrency int) plan.Plan {
	src := map[string]plan.Value{
		"url": plantest.Str(brokers), "topic": plantest.Str(topic), "source_metadata": {Type: plan.TBool, Bool: true},
		"checkpoint_store": plantest.Str("pebble://" + state)}
	if group != "" {
		src["group_id"] = plantest.Str(group)
		src["session_timeout"] = shortSession
	}
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "kafka", Side: plan.SideInput, Attrs: src},
		{ID: "n1", Role: plan.RoleSink, Kind: "sql", Side: plan.SideOutput, Attrs: map[string]plan.Value{
			"url":          plantest.Tmpl(plantest.Lit("sqlite://" + db)),
			"create_table": plantest.Str(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, part INTEGER, off INTEGER, msgid TEXT, hop_id TEXT)`),
			"insert_query": plantest.Tmpl(plantest.Lit("INSERT INTO orders (id, amount, part, off, msgid, hop_id) VALUES ("), plantest.Ex(`payload.order_id`),
				plantest.Lit(", "), plantest.Ex("payload.amount"), plantest.Lit(", "), plantest.Ex(`meta["mqb.src.partition"]`), plantest.Lit(", "), plantest.Ex(`meta["mqb.src.offset"]`),
				plantest.Lit(", "), plantest.Ex("message_id"), plantest.Lit(", "), plantest.Ex(`meta["mqb.id"] ?? ""`), plantest.Lit(") ON CONFLICT (id) DO NOTHING")),
		}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "consume", Guarantee: plan.EffectivelyOnce, Concurrency: concurrency, BatchSize: batch,
		Nodes: nodes, Edges: plantest.Chain(nodes)}}}
}

func TestKafkaSourceToSQLite(t *testing.T) {
	brokers := testsrv.Kafka(t, "orders:4")
	d := t.TempDir()
	db, state := filepath.Join(d, "orders.db"), filepath.Join(d, "state")
	const n = 5000
	produceOrders(t, brokers, "orders", 0, n)
	p := kafkaSQLitePlan(brokers, "orders", "", state, db, 256, 2)
	st := runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == n })
	rs := st.Route("consume")
	runtest.CheckCounts(t, rs)
	if rs.In < n || rs.Committed != n {
		t.Errorf("first run: %+v, want in >= %d and committed %d", rs, n, n)
	}
	runtest.CheckOrders(t, db, n)

	// Provenance and identity: partition/offset from mqb.src.*, and the
	// message_id partition<<64 | offset (no header, keys are not 16 bytes).
	conn, err := sql.Open("sqlite3", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT part, off, msgid FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var part, off int64
		var msgid string
		if err := rows.Scan(&part, &off, &msgid); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("00000000-0000-%04x-%04x-%012x", part&0xffff, (off>>48)&0xffff, off&0xffffffffffff)
		if msgid != want {
			t.Fatalf("partition %d offset %d: message_id %s, want %s", part, off, msgid, want)
		}
	}
	rows.Close()

	// A second run resumes from the checkpoint: only the new record (in
	// one partition) is read. A third reads nothing: the partitions the
	// second run read nothing from kept their checkpointed offsets.
	produceOrders(t, brokers, "orders", n, 1)
	st = runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == n+1 })
	if rs := st.Route("consume"); rs.In != 1 {
		t.Errorf("second run read %d records, want the 1 new one: %+v", rs.In, rs)
	}
	runtest.CheckOrders(t, db, n+1)
	began := time.Now()
	st = runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return time.Since(began) > time.Second })
	if rs := st.Route("consume"); rs.In != 0 || rs.Committed != n+1 {
		t.Errorf("third run: %+v, want nothing read and %d committed", rs, n+1)
	}
}

// TestKafkaIdentitySurvivesHop: file → id → kafka (mq_bridge.message_id and
// mqb.id headers) → kafka source → SQLite keyed on meta["mqb.id"]: the id
// minted on the first hop is the message_id on the second.
func TestKafkaIdentitySurvivesHop(t *testing.T) {
	brokers := testsrv.Kafka(t, "hop:3")
	e := plantest.NewEnv(t)
	const n = 2000
	plantest.WriteOrders(t, e.Input, n)
	sink := plan.Node{Kind: "kafka", Attrs: map[string]plan.Value{"url": plantest.Str(brokers), "topic": plantest.Str("hop")}}
	if _, err := runtime.Run(context.Background(), plantest.SinkPlan(e.Input, e.State, 256, sink), runtest.Options()); err != nil {
		t.Fatal(err)
	}
	// The ids the first hop published, read straight from the topic.
	published := map[string]string{} // mqb.id → message_id header
	for part := range 3 {
		for _, m := range readPartition(t, brokers, "hop", part) {
			var id, mid string
			for _, h := range m.Headers {
				switch h.Key {
				case "mqb.id":
					id = string(h.Value)
				case runtime.HeaderMessageID:
					mid = string(h.Value)
				}
			}
			published[id] = mid
		}
	}
	if len(published) != n {
		t.Fatalf("topic holds %d distinct mqb.id, want %d", len(published), n)
	}

	db := filepath.Join(e.Dir, "hop.db")
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "kafka", Attrs: map[string]plan.Value{
			"url": plantest.Str(brokers), "topic": plantest.Str("hop"), "group_id": plantest.Str("hop-readers")}},
		{ID: "n1", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
			"url":          plantest.Tmpl(plantest.Lit("sqlite://" + db)),
			"create_table": plantest.Str(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, msgid TEXT NOT NULL)`),
			"insert_query": plantest.Tmpl(plantest.Lit("INSERT INTO orders (id, msgid) VALUES ("), plantest.Ex(`meta["mqb.id"]`),
				plantest.Lit(", "), plantest.Ex("message_id"), plantest.Lit(") ON CONFLICT (id) DO NOTHING")),
		}},
	}
	p := plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "hop", Guarantee: plan.EffectivelyOnce,
		Concurrency: 2, BatchSize: 256, Nodes: nodes, Edges: plantest.Chain(nodes)}}}
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == n })
	got := runtest.SQLiteMap[string](t, db, `SELECT id, msgid FROM orders`)
	for id, mid := range got {
		if published[id] != mid {
			t.Errorf("mqb.id %s: message_id %s after the hop, published as %s", id, mid, published[id])
		}
	}
	if len(got) != n {
		t.Errorf("%d rows, want %d", len(got), n)
	}
}

// TestCrashKafkaToSQLite: a route reading a topic in a consumer group is
// SIGKILLed repeatedly (the broker is a separate process that survives):
// every record lands once, and the group's committed offsets never pass
// what was written.
func TestCrashKafkaToSQLite(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	for _, group := range []string{"", "crashers"} {
		t.Run("group="+group, func(t *testing.T) {
			k := testsrv.NewKafkaProcess(t, kafkabroker.Config{Topics: []string{"orders:4"}})
			d := t.TempDir()
			db, state := filepath.Join(d, "orders.db"), filepath.Join(d, "state")
			const n = 100000
			produceOrders(t, k.Brokers(), "orders", 0, n)
			p := kafkaSQLitePlan(k.Brokers(), "orders", group, state, db, 128, 2)
			done := func() bool { return runtest.CountRows(t, db) == n }
			if group != "" {
				// The rows may all be in SQLite before the final run holds
				// every partition: killed members keep theirs until their
				// session times out. Done means the group committed the end.
				done = func() bool {
					return runtest.CountRows(t, db) == n && groupCommitted(t, k.Brokers(), "orders", group, 4) == int64(n)
				}
			}
			st := runtest.CrashUntil(t, bin, p, d, 31, 4, done)
			rs := st.Route("consume")
			runtest.CheckCounts(t, rs)
			t.Logf("final run %+v", rs)
			runtest.CheckOrders(t, db, n)
			if group != "" {
				checkGroupCommitted(t, k.Brokers(), "orders", group, 4, n)
			}
		})
	}
}

// checkGroupCommitted asserts the group committed every partition to its end.
func checkGroupCommitted(t testing.TB, brokers, topic, group string, parts, n int) {
	t.Helper()
	if total := groupCommitted(t, brokers, topic, group, parts); total != int64(n) {
		t.Errorf("group %s committed %d records over %d partitions, want %d", group, total, parts, n)
	}
}

// groupCommitted sums the group's committed offsets over the topic's partitions.
func groupCommitted(t testing.TB, brokers, topic, group string, parts int) int64 {
	t.Helper()
	client := &kafkago.Client{Addr: kafkago.TCP(brokers), Timeout: 10 * time.Second}
	ps := make([]int, parts)
	for i := range ps {
		ps[i] = i
	}
	resp, err := client.OffsetFetch(context.Background(), &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, p := range resp.Topics[topic] {
		total += max(p.CommittedOffset, 0)
	}
	return total
}

// TestCrashKafkaToParts: kafka → file (name_by = source_position) killed
// repeatedly: every offset of every partition is in exactly one part.
func TestCrashKafkaToParts(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	k := testsrv.NewKafkaProcess(t, kafkabroker.Config{Topics: []string{"orders:3"}})
	d := t.TempDir()
	partsDir, state := filepath.Join(d, "parts"), filepath.Join(d, "state")
	const n = 150000
	produceOrders(t, k.Brokers(), "orders", 0, n)
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "kafka", Attrs: map[string]plan.Value{
			"url": plantest.Str(k.Brokers()), "topic": plantest.Str("orders"), "checkpoint_store": plantest.Str("pebble://" + state)}},
		{ID: "n1", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{
			"path": plantest.Str(partsDir), "name_by": plantest.Enum("source_position")}},
	}
	p := plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "parts", Guarantee: plan.EffectivelyOnce,
		Concurrency: 2, BatchSize: 100, Nodes: nodes, Edges: plantest.Chain(nodes)}}}
	covered := func() (map[[2]uint64]int, int) {
		seen := map[[2]uint64]int{}
		entries, _ := os.ReadDir(partsDir)
		lines := 0
		for _, en := range entries {
			m := partNameRE.FindStringSubmatch(en.Name())
			if m == nil {
				continue
			}
			part, _ := strconv.ParseUint(m[2], 10, 32)
			start, _ := strconv.ParseUint(m[3], 10, 64)
			end, _ := strconv.ParseUint(m[4], 10, 64)
			data, err := os.ReadFile(filepath.Join(partsDir, en.Name()))
			if err != nil {
				continue
			}
			if got := bytes.Count(data, []byte("\n")); uint64(got) != end-start+1 {
				t.Errorf("part %s holds %d lines for %d offsets", en.Name(), got, end-start+1)
			}
			for off := start; off <= end; off++ {
				seen[[2]uint64{part, off}]++
				lines++
			}
		}
		return seen, lines
	}
	st := runtest.CrashUntil(t, bin, p, d, 41, 4, func() bool { _, l := covered(); return l >= n })
	rs := st.Route("parts")
	runtest.CheckCounts(t, rs)
	t.Logf("final run %+v", rs)
	seen, lines := covered()
	if lines != n || len(seen) != n {
		t.Errorf("parts hold %d lines over %d distinct offsets, want %d once each", lines, len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("partition %d offset %d written %d times", k[0], k[1], c)
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(partsDir, ".part-*")); len(tmp) > 0 {
		t.Errorf("temporary parts left behind: %v", tmp)
	}
}

// waitGroupMembers waits until group has members members, each assigned.
func waitGroupMembers(t testing.TB, brokers, group string, members int) {
	t.Helper()
	client := &kafkago.Client{Addr: kafkago.TCP(brokers), Timeout: 10 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.DescribeGroups(context.Background(), &kafkago.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].GroupState == "Stable" {
			assigned := 0
			for _, m := range resp.Groups[0].Members {
				if len(m.MemberAssignments.Topics) > 0 {
					assigned++
				}
			}
			if assigned == members {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not reach %d assigned members: %+v %v", group, members, resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shortSession is the session_timeout of the tests' group members: a
// killed member's partitions go to the others after 3 s instead of the
// default 10.
var shortSession = plan.Value{Type: plan.TDuration, Str: "3s", Int: int64(3 * time.Second)}

// kafkaPostgresPlan is kafka (consumer group) → dedup on the order id in
// the shared store at url → the orders table at url, keyed on the order
// id, each row naming the instance (who) that wrote it.
func kafkaPostgresPlan(brokers, topic, group, state, url, who string, batch int) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "kafka", Side: plan.SideInput, Attrs: map[string]plan.Value{
			"url": plantest.Str(brokers), "topic": plantest.Str(topic), "group_id": plantest.Str(group),
			"source_metadata": {Type: plan.TBool, Bool: true}, "checkpoint_store": plantest.Str("pebble://" + state),
			"session_timeout": shortSession}},
		{ID: "n1", Role: plan.RoleStep, Kind: "dedup", Side: plan.SideInput, Attrs: map[string]plan.Value{
			"key": plantest.Expr("payload.order_id"), "store": plantest.Str(url),
			"ttl": {Type: plan.TDuration, Str: "1h", Int: int64(time.Hour)}}},
		{ID: "n2", Role: plan.RoleSink, Kind: "sql", Side: plan.SideOutput, Attrs: map[string]plan.Value{
			"url":          plantest.Tmpl(plantest.Lit(url)),
			"create_table": plantest.Str(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, part INTEGER, hop_id TEXT)`),
			"insert_query": plantest.Tmpl(plantest.Lit("INSERT INTO orders (id, amount, part, hop_id) VALUES ("), plantest.Ex(`payload.order_id`),
				plantest.Lit(", "), plantest.Ex("payload.amount"), plantest.Lit(", "), plantest.Ex(`meta["mqb.src.partition"]`),
				plantest.Lit(", "), plantest.Ex(strconv.Quote(who)), plantest.Lit(") ON CONFLICT (id) DO NOTHING")),
		}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "consume", Guarantee: plan.EffectivelyOnce, Concurrency: 1, BatchSize: batch,
		Nodes: nodes, Edges: plantest.Chain(nodes)}}}
}

// TestKafkaGroupScaleOut: two processes in one consumer group share the
// work, a third joins mid-stream, then one is SIGKILLed and the others take
// its partitions over. They share one PostgreSQL database, as instances on
// separate machines would: the dedup store and the orders table, keyed on
// the order id. Every order is published twice, under two keys, so its
// copies usually sit on different partitions read by different instances,
// and the shared store is what drops the second. No order is lost, none
// is stored twice, and the store remembers each order once.
func TestKafkaGroupScaleOut(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	k := testsrv.NewKafkaProcess(t, kafkabroker.Config{Topics: []string{"orders:4"}})
	url := testsrv.Postgres(t)
	d := t.TempDir()
	// a is killed at about 6k rows (after a and b wrote 1000 each and c
	// 500): n leaves most of the orders to read after the kill.
	const n = 40000
	ctx := context.Background()
	pg, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	count := func(query string, args ...any) int {
		var c int
		if err := pg.QueryRow(ctx, query, args...).Scan(&c); err != nil {
			return -1 // not created yet
		}
		return c
	}
	rowsBy := func(who string) int { return count(`SELECT count(*) FROM orders WHERE hop_id = $1`, who) }
	total := func() int { return count(`SELECT count(*) FROM orders`) }
	start := func(name string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
		p := kafkaPostgresPlan(k.Brokers(), "orders", "pair", filepath.Join(d, name+"-state"), url, name, 64)
		data, _ := json.Marshal(p)
		path := filepath.Join(d, name+".json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "-plan", path)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &stdout, &stderr
	}
	// Both join the group before any record exists, so the group has
	// split the partitions between them when records arrive; a is killed
	// once both are writing, and b takes a's partitions over.
	a, _, aErr := start("a")
	b, bOut, bErr := start("b")
	waitGroupMembers(t, k.Brokers(), "pair", 2)
	// The group's committed offsets must only move forward, through the
	// rebalances of the join and of the kill: a member committing for a
	// partition it no longer owns would move one back.
	stopWatch := make(chan struct{})
	watched := make(chan []string, 1)
	go func() {
		client := &kafkago.Client{Addr: kafkago.TCP(k.Brokers()), Timeout: 10 * time.Second}
		last := map[int]int64{}
		var regressions []string
		defer func() { watched <- regressions }()
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(20 * time.Millisecond):
			}
			resp, err := client.OffsetFetch(context.Background(), &kafkago.OffsetFetchRequest{GroupID: "pair", Topics: map[string][]int{"orders": {0, 1, 2, 3}}})
			if err != nil {
				continue
			}
			for _, p := range resp.Topics["orders"] {
				prev, seen := last[p.Partition]
				if seen && p.CommittedOffset < prev && len(regressions) < 10 {
					regressions = append(regressions, fmt.Sprintf("partition %d: %d after %d", p.Partition, p.CommittedOffset, prev))
				}
				if p.CommittedOffset >= 0 { // -1: nothing committed yet
					last[p.Partition] = max(prev, p.CommittedOffset)
				}
			}
		}
	}()
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for from := 0; from < n; from += 5000 {
			produceOrders(t, k.Brokers(), "orders", from, 5000)
			produceOrdersKeyed(t, k.Brokers(), "orders", "copy-", from, 5000)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for rowsBy("a") < 1000 || rowsBy("b") < 1000 {
		if time.Now().After(deadline) || total() == n {
			a.Process.Kill()
			b.Process.Kill()
			t.Fatalf("the instances did not both write (a %d rows, b %d of %d): a: %s\nb: %s",
				rowsBy("a"), rowsBy("b"), n, aErr, bErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// c joins while records flow: a rebalance with records in flight, in
	// which a and b commit what they acked of the partitions they give up.
	c, cOut, cErr := start("c")
	deadline = time.Now().Add(time.Minute)
	for rowsBy("c") < 500 && total() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("c joined mid-stream and wrote %d rows before a was killed", rowsBy("c"))
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	t.Logf("a killed at %d rows (a wrote %d, b %d)", total(), rowsBy("a"), rowsBy("b"))
	<-produced
	deadline = time.Now().Add(2 * time.Minute)
	// Done when every order is stored and the group has committed both
	// copies of each: the table fills up as soon as the first copies are
	// in, while the last second copies may still be unread.
	for total() < n || groupCommitted(t, k.Brokers(), "orders", "pair", 4) < 2*n {
		if time.Now().After(deadline) {
			b.Process.Kill()
			b.Wait()
			c.Process.Kill()
			c.Wait()
			t.Fatalf("b and c did not finish after a was killed (%d rows, %d committed): %s\n%s",
				total(), groupCommitted(t, k.Brokers(), "orders", "pair", 4), bErr, cErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Process.Signal(syscall.SIGTERM)
	c.Process.Signal(syscall.SIGTERM)
	if err := c.Wait(); err != nil {
		t.Errorf("c: %v\n%s", err, cErr)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("b: %v\n%s", err, bErr)
	}
	close(stopWatch)
	if r := <-watched; len(r) > 0 {
		t.Errorf("committed offsets moved back: %v", r)
	}
	var duplicates int64
	for name, out := range map[string]*bytes.Buffer{"b": bOut, "c": cOut} {
		var st runtime.Stats
		if err := json.Unmarshal(out.Bytes(), &st); err != nil {
			t.Fatalf("%s stats %q: %v", name, out, err)
		}
		t.Logf("%s: %+v", name, st.Route("consume"))
		duplicates += st.Route("consume").Deduplicated
	}
	// Every copy was read and committed; each order is stored once.
	checkGroupCommitted(t, k.Brokers(), "orders", "pair", 4, 2*n)
	if got, distinct := total(), count(`SELECT count(DISTINCT id) FROM orders`); got != n || distinct != n {
		t.Errorf("%d rows, %d distinct ids, want %d", got, distinct, n)
	}
	if bad := count(`SELECT count(*) FROM orders WHERE id <> 'o-' || amount`); bad != 0 {
		t.Errorf("%d rows whose id and amount disagree", bad)
	}
	if kept := count(`SELECT count(*) FROM mqb_dedup_keys WHERE state = 2`); kept != n {
		t.Errorf("the shared dedup store holds %d processed keys, want %d", kept, n)
	}
	if duplicates == 0 {
		t.Errorf("b and c dropped no duplicate: the copies never met the shared store")
	}
	writers := map[string]int{}
	for _, who := range []string{"a", "b", "c"} {
		writers[who] = rowsBy(who)
	}
	t.Logf("rows written by each instance: %v; duplicates dropped by b and c: %d", writers, duplicates)
	if writers["a"] == 0 || writers["b"] == 0 {
		t.Errorf("the two instances did not share the work: %v", writers)
	}
}

func TestKafkaMessageID(t *testing.T) {
	id := uuid.MustParse("0190f3a4-5b6c-7d8e-9f00-112233445566")
	key16 := []byte("0123456789abcdef")
	for _, tc := range []struct {
		name string
		m    kafkago.Message
		want string
	}{
		{"header text", kafkago.Message{Key: key16, Headers: []kafkago.Header{{Key: runtime.HeaderMessageID, Value: []byte(id.String())}}}, id.String()},
		{"header raw", kafkago.Message{Headers: []kafkago.Header{{Key: runtime.HeaderMessageID, Value: id[:]}}}, id.String()},
		{"16-byte key", kafkago.Message{Key: key16, Partition: 3, Offset: 9}, uuid.UUID(key16).String()},
		{"bad header, short key", kafkago.Message{Key: []byte("k"), Partition: 3, Offset: 9,
			Headers: []kafkago.Header{{Key: runtime.HeaderMessageID, Value: []byte("nope")}}}, "00000000-0000-0003-0000-000000000009"},
	} {
		got, ok := kafkaMessageID(&tc.m)
		if !ok || got.String() != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// partNameRE matches the name of a part the file sink writes under
// name_by = source_position (connector/file/sink.go): its source, partition,
// and first and last Seq.
var partNameRE = regexp.MustCompile(`^part-(.+?)(?:-(\d{10}))?-(\d{20})-(\d{20})\.jsonl$`)

// TestKafkaSessionTimeoutRange: a session_timeout outside 3s–5m is refused
// when the route is built, naming the attribute, before any broker is
// dialled; one inside the range is taken.
func TestKafkaSessionTimeoutRange(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{time.Second, "session_timeout: must be from 3s to 5m, got 1s"},
		{10 * time.Minute, "session_timeout: must be from 3s to 5m, got 10m0s"},
		{3 * time.Second, ""},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			d := t.TempDir()
			p := kafkaSQLitePlan("127.0.0.1:1", "orders", "g", filepath.Join(d, "state"), filepath.Join(d, "orders.db"), 16, 1)
			p.Routes[0].Nodes[0].Attrs["session_timeout"] = plan.Value{Type: plan.TDuration, Str: tc.d.String(), Int: int64(tc.d)}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := runtime.Run(ctx, p, runtest.Options())
			if tc.want == "" {
				if err != nil && strings.Contains(err.Error(), "session_timeout") {
					t.Fatalf("run refused a session_timeout in range: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run ended with %v, want %q", err, tc.want)
			}
		})
	}
}
