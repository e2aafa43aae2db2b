// Command mqb-testbroker runs an in-process Kafka-protocol broker (franz-go's
// kfake) on 127.0.0.1 as a separate process, for examples and crash tests
// that need a broker to outlive, or die independently of, the process
// under test. It prints the bootstrap address as the first line on stdout
// and runs until SIGINT or SIGTERM, then saves its state to -data-dir.
//
//	mqb-testbroker -port 9092 -topics orders:3,payments -data-dir /tmp/kafka
//	mqb-testbroker -port 9092 -topics orders:3 -sasl SCRAM-SHA-256:mqb:secret
//
// Started again with the same -port and -data-dir it carries on with the
// same topics, records and committed consumer-group offsets. A SIGKILL
// loses what was not yet written out, as a crashed broker would.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
)

func main() {
	var (
		cfg      kafkabroker.Config
		topics   string
		addrFile string
		users    userFlags
	)
	flag.IntVar(&cfg.Port, "port", 0, "port of the first broker on 127.0.0.1 (0: a free port)")
	flag.IntVar(&cfg.Brokers, "brokers", 1, "number of brokers, on consecutive ports")
	flag.StringVar(&topics, "topics", "", "comma-separated topics to create, each name or name:partitions")
	flag.IntVar(&cfg.Partitions, "partitions", 1, "partitions of topics given without a count and of auto-created topics")
	flag.StringVar(&cfg.DataDir, "data-dir", "", "directory persisting the broker's state across restarts (default: in memory)")
	flag.StringVar(&addrFile, "addr-file", "", "also write the bootstrap address to this file once listening")
	flag.Var(&users, "sasl", "require SASL: a user as MECHANISM:NAME:PASSWORD (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); repeatable")
	flag.Parse()
	cfg.Users = users
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "mqb-testbroker: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if topics != "" {
		cfg.Topics = strings.Split(topics, ",")
	}

	// Catch signals before listening so an early SIGTERM still saves state.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)

	c, err := kafkabroker.Start(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mqb-testbroker: %v\n", err)
		os.Exit(1)
	}
	addr := strings.Join(c.ListenAddrs(), ",")
	if addrFile != "" {
		// Write then rename so a reader never sees a partial address.
		tmp := addrFile + ".tmp"
		err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644)
		if err == nil {
			err = os.Rename(tmp, addrFile)
		}
		if err != nil {
			c.Close()
			fmt.Fprintf(os.Stderr, "mqb-testbroker: write address: %v\n", err)
			os.Exit(1)
		}
	}
	fmt.Println(addr)

	s := <-sig
	fmt.Fprintf(os.Stderr, "mqb-testbroker: %s, stopping\n", s)
	c.Close()
}

// userFlags collects -sasl MECHANISM:NAME:PASSWORD values.
type userFlags []kafkabroker.User

func (u *userFlags) String() string { return fmt.Sprint(len(*u), " users") }

func (u *userFlags) Set(v string) error {
	mech, rest, ok := strings.Cut(v, ":")
	name, pass, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || name == "" || pass == "" {
		return fmt.Errorf("want MECHANISM:NAME:PASSWORD")
	}
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return fmt.Errorf("mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	*u = append(*u, kafkabroker.User{Mechanism: mech, Name: name, Password: pass})
	return nil
}
