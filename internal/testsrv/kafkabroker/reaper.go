package kafkabroker

import (
	"context"
	"errors"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The reaper removes group members that died while the group waited for
// them to join.
//
// kfake arms a member's session timer when it delivers the member's
// JoinGroup response. A member killed while its join was pending has no
// connection to deliver to, so no timer is armed: the member stays in the
// group for ever, holding the partitions the leader assigns it, and a
// consumer group whose other member was SIGKILLed mid-join never reads
// them. Kafka expires every member of a new generation alike. The reaper
// restores that: a member the broker has heard nothing from (no join,
// sync, heartbeat, offset commit) for longer than its session and
// rebalance timeouts together (a live member waits in a join at most its
// rebalance timeout, then heartbeats within its session timeout) is sent
// a LeaveGroup on its behalf.
type reaper struct {
	c     *kfake.Cluster
	every time.Duration

	mu     sync.Mutex
	groups map[string]*reapGroup

	stop chan struct{}
	done chan struct{}
}

type reapGroup struct {
	members map[string]time.Time // member id → last request heard from it
	limit   time.Duration        // the longest session + rebalance timeout joined with
}

// slack is added to a member's limit before it is reaped.
const reapSlack = time.Second

func startReaper(c *kfake.Cluster, every time.Duration) *reaper {
	r := &reaper{c: c, every: every, groups: map[string]*reapGroup{},
		stop: make(chan struct{}), done: make(chan struct{})}
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		r.observe(req, time.Now())
		return nil, nil, false // observe only: the cluster handles it
	})
	go r.run()
	return r
}

// observe notes which member of which group a group request came from.
func (r *reaper) observe(req kmsg.Request, now time.Time) {
	var group, member string
	var limit time.Duration
	switch q := req.(type) {
	case *kmsg.JoinGroupRequest:
		group, member = q.Group, q.MemberID
		rebalance := q.RebalanceTimeoutMillis
		if q.Version == 0 {
			rebalance = q.SessionTimeoutMillis
		}
		limit = time.Duration(q.SessionTimeoutMillis+rebalance) * time.Millisecond
	case *kmsg.SyncGroupRequest:
		group, member = q.Group, q.MemberID
	case *kmsg.HeartbeatRequest:
		group, member = q.Group, q.MemberID
	case *kmsg.OffsetCommitRequest:
		group, member = q.Group, q.MemberID
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		g = &reapGroup{members: map[string]time.Time{}}
		r.groups[group] = g
	}
	g.limit = max(g.limit, limit)
	if member != "" {
		g.members[member] = now
	}
}

func (r *reaper) run() {
	defer close(r.done)
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			for group, members := range r.silent(time.Now()) {
				r.evict(group, members)
			}
		}
	}
}

// silent lists, per group, the members silent past the group's limit. A
// member first seen in the group's state (its join carried no member id
// yet) is timed from now.
func (r *reaper) silent(now time.Time) map[string][]string {
	r.mu.Lock()
	names := make([]string, 0, len(r.groups))
	for name := range r.groups {
		names = append(names, name)
	}
	r.mu.Unlock()
	out := map[string][]string{}
	for _, name := range names {
		info := r.c.GroupInfo(name)
		r.mu.Lock()
		g := r.groups[name]
		present := map[string]bool{}
		if info != nil {
			for _, m := range info.Members {
				present[m.MemberID] = true
				seen, ok := g.members[m.MemberID]
				if !ok {
					g.members[m.MemberID] = now
					continue
				}
				if g.limit > 0 && now.Sub(seen) > g.limit+reapSlack {
					out[name] = append(out[name], m.MemberID)
				}
			}
		}
		for id := range g.members {
			if !present[id] {
				delete(g.members, id) // left, or removed by the broker
			}
		}
		r.mu.Unlock()
	}
	return out
}

// evict asks the group's coordinator to remove members. Any broker may be
// asked: the ones that are not the coordinator refuse.
func (r *reaper) evict(group string, members []string) {
	req := &kafkago.LeaveGroupRequest{GroupID: group}
	for _, id := range members {
		req.Members = append(req.Members, kafkago.LeaveGroupRequestMember{ID: id})
	}
	client := &kafkago.Client{Timeout: 5 * time.Second}
	for _, addr := range r.c.ListenAddrs() {
		req.Addr = kafkago.TCP(addr)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := client.LeaveGroup(ctx, req)
		cancel()
		if err == nil && (resp.Error == nil || !errors.Is(resp.Error, kafkago.NotCoordinatorForGroup)) {
			return
		}
	}
}

func (r *reaper) close() {
	close(r.stop)
	<-r.done
}
