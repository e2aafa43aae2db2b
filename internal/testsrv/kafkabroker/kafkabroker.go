// Package kafkabroker starts franz-go's in-process Kafka-protocol cluster
// (kfake) on 127.0.0.1 the way mqb's tests and the mqb-testbroker command
// both want it. It lives apart from testsrv so the command does not link
// the test helpers.
package kafkabroker

import (
	"crypto/tls"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config says how to start a cluster. The zero value is one broker on a
// free port, in memory, with no topics, auto-creating one-partition topics.
type Config struct {
	// Port of the first broker; 0 picks a free one. With Brokers > 1 the
	// others take the following ports.
	Port int
	// Brokers is the number of brokers; 0 means 1.
	Brokers int
	// Topics to create, each "name" or "name:partitions".
	Topics []string
	// Partitions for topics without ":partitions" and for auto-created
	// topics; 0 means 1.
	Partitions int
	// DataDir, when set, persists the cluster's logs, offsets and groups
	// there; a cluster started again on the same DataDir carries on.
	DataDir string
	// Users, when set, turns SASL on: clients must authenticate as one of
	// them.
	Users []User
	// TLS, when set, serves TLS only, with this configuration.
	TLS *tls.Config
}

// User is a SASL user of the cluster.
type User struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism, Name, Password string
}

// Cluster is a running kfake cluster with the member reaper beside it
// (reaper.go).
type Cluster struct {
	*kfake.Cluster
	reaper *reaper
}

// Close stops the reaper, then the cluster.
func (c *Cluster) Close() {
	if c.reaper != nil {
		c.reaper.close()
	}
	c.Cluster.Close()
}

// Start starts a cluster. Close it to stop it (and, with a DataDir, save
// its state). Group members that die while joining are removed once their
// session would have expired on Kafka (reaper.go); on a cluster with SASL
// or TLS they are not, since the reaper speaks plain unauthenticated Kafka.
func Start(cfg Config) (*Cluster, error) {
	partitions := cfg.Partitions
	if partitions <= 0 {
		partitions = 1
	}
	brokers := cfg.Brokers
	if brokers <= 0 {
		brokers = 1
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(brokers),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(partitions),
		// Let tests use short session timeouts to see rebalances quickly.
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.ClusterID("mqb-test"),
	}
	if cfg.Port != 0 {
		ports := make([]int, brokers)
		for i := range ports {
			ports[i] = cfg.Port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if len(cfg.Users) > 0 {
		opts = append(opts, kfake.EnableSASL())
		for _, u := range cfg.Users {
			opts = append(opts, kfake.Superuser(u.Mechanism, u.Name, u.Password))
		}
	}
	if cfg.TLS != nil {
		opts = append(opts, kfake.TLS(cfg.TLS))
	}
	for _, spec := range cfg.Topics {
		name, n, err := ParseTopic(spec, partitions)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kfake.SeedTopics(int32(n), name))
	}
	kc, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start Kafka-protocol broker: %w", err)
	}
	c := &Cluster{Cluster: kc}
	if len(cfg.Users) == 0 && cfg.TLS == nil {
		c.reaper = startReaper(kc, time.Second)
	}
	return c, nil
}

// ParseTopic splits "name:partitions"; a bare name gets def partitions.
func ParseTopic(spec string, def int) (name string, partitions int, err error) {
	name, count, ok := strings.Cut(spec, ":")
	if name == "" {
		return "", 0, fmt.Errorf("topic %q: empty name", spec)
	}
	if !ok {
		return name, def, nil
	}
	partitions, err = strconv.Atoi(count)
	if err != nil || partitions <= 0 {
		return "", 0, fmt.Errorf("topic %q: partitions must be a positive number", spec)
	}
	return name, partitions, nil
}
