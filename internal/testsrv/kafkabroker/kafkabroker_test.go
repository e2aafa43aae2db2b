package kafkabroker

import "testing"

func TestParseTopic(t *testing.T) {
	for _, tc := range []struct {
		spec       string
		name       string
		partitions int
		err        bool
	}{
		{spec: "orders", name: "orders", partitions: 2},
		{spec: "orders:6", name: "orders", partitions: 6},
		{spec: "orders:0", err: true},
		{spec: "orders:x", err: true},
		{spec: ":3", err: true},
	} {
		name, n, err := ParseTopic(tc.spec, 2)
		if (err != nil) != tc.err || name != tc.name || n != tc.partitions {
			t.Errorf("ParseTopic(%q) = %q, %d, %v", tc.spec, name, n, err)
		}
	}
}

func TestStartSeedsTopics(t *testing.T) {
	c, err := Start(Config{Topics: []string{"a:3", "b"}, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.ListenAddrs()) != 1 {
		t.Fatalf("listening on %v, want one broker", c.ListenAddrs())
	}
	for topic, want := range map[string]int32{"a": 3, "b": 2} {
		var n int32
		for p := int32(0); p < 10; p++ {
			if c.LeaderFor(topic, p) >= 0 {
				n++
			}
		}
		if n != want {
			t.Errorf("topic %s has %d partitions, want %d", topic, n, want)
		}
	}
}
