package kafka

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// testCA makes a CA and a certificate it signs for 127.0.0.1; it returns
// the server's TLS config and the CA's PEM file.
func testCA(t *testing.T) (*tls.Config, string) {
	c := testsrv.TestCA(t)
	return c.Server, c.CAFile
}

const testKafkaPassword = "s3cret-Pa55word"

// securedBroker starts a cluster with one SASL user (and TLS when tlsCfg
// is set) and a topic "orders" of two partitions.
func securedBroker(t *testing.T, mech string, tlsCfg *tls.Config) string {
	t.Helper()
	var users []kafkabroker.User
	if mech != "" {
		users = []kafkabroker.User{{Mechanism: mech, Name: "mqb", Password: testKafkaPassword}}
	}
	c, err := kafkabroker.Start(kafkabroker.Config{Topics: []string{"orders:2"}, Users: users, TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// Records go file → kafka → SQLite through brokers that require SASL,
// TLS or both, with every mechanism, as a group member and not.
func TestKafkaSecurity(t *testing.T) {
	serverTLS, caFile := testCA(t)
	for _, tc := range []struct {
		name  string
		mech  string // broker side; "" = no SASL
		tls   bool
		group string
		attrs map[string]plan.Value
	}{
		{name: "plain", mech: "PLAIN", attrs: map[string]plan.Value{
			"username": plantest.Tmpl(plantest.Lit("mqb")), "password": plantest.Tmpl(plantest.Lit(testKafkaPassword))}},
		{name: "scram256_tls", mech: "SCRAM-SHA-256", tls: true, attrs: map[string]plan.Value{
			"username": plantest.Tmpl(plantest.Lit("mqb")), "password": plantest.Tmpl(plantest.Lit(testKafkaPassword)),
			"sasl_mechanism": plantest.Enum("scram_sha_256"), "tls_ca_file": plantest.Str(caFile)}},
		{name: "scram512_tls_group", mech: "SCRAM-SHA-512", tls: true, group: "secure", attrs: map[string]plan.Value{
			"username": plantest.Tmpl(plantest.Lit("mqb")), "password": plantest.Tmpl(plantest.Lit(testKafkaPassword)),
			"sasl_mechanism": plantest.Enum("scram_sha_512"), "tls": {Type: plan.TBool, Bool: true}, "tls_ca_file": plantest.Str(caFile)}},
		{name: "tls_only", tls: true, attrs: map[string]plan.Value{"tls_ca_file": plantest.Str(caFile)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var srvTLS *tls.Config
			if tc.tls {
				srvTLS = serverTLS
			}
			brokers := securedBroker(t, tc.mech, srvTLS)
			e := plantest.NewEnv(t)
			const n = 2000
			plantest.WriteOrders(t, e.Input, n)
			sinkAttrs := map[string]plan.Value{"url": plantest.Str(brokers), "topic": plantest.Str("orders")}
			for k, v := range tc.attrs {
				sinkAttrs[k] = v
			}
			st, err := runtime.Run(context.Background(), plantest.SinkPlan(e.Input, e.State, 256, plan.Node{Kind: "kafka", Attrs: sinkAttrs}), runtest.Options())
			if err != nil {
				t.Fatal(err)
			}
			if rs := st.Route("publish"); rs.Out != n {
				t.Fatalf("published %+v, want %d", rs, n)
			}
			p := kafkaSQLitePlan(brokers, "orders", tc.group, e.State+"-r", e.DB, 128, 1)
			for k, v := range tc.attrs {
				p.Routes[0].Nodes[0].Attrs[k] = v
			}
			runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, e.DB) == n })
			runtest.CheckOrders(t, e.DB, n)
		})
	}
}

// Wrong or missing credentials and an untrusted certificate stop the
// route at start-up with one clear line that never shows the password.
func TestKafkaSecurityRefused(t *testing.T) {
	serverTLS, caFile := testCA(t)
	saslBroker := securedBroker(t, "SCRAM-SHA-256", nil)
	tlsBroker := securedBroker(t, "", serverTLS)
	for _, tc := range []struct {
		name, brokers, want string
		attrs               map[string]plan.Value
	}{
		{"wrong password", saslBroker, "SASL authentication failed", map[string]plan.Value{
			"username": plantest.Tmpl(plantest.Lit("mqb")), "password": plantest.Tmpl(plantest.Lit(testKafkaPassword + "x")), "sasl_mechanism": plantest.Enum("scram_sha_256")}},
		{"wrong mechanism", saslBroker, "SASL authentication failed", map[string]plan.Value{
			"username": plantest.Tmpl(plantest.Lit("mqb")), "password": plantest.Tmpl(plantest.Lit(testKafkaPassword)), "sasl_mechanism": plantest.Enum("plain")}},
		{"untrusted certificate", tlsBroker, "not trusted (set tls_ca_file", map[string]plan.Value{
			"tls": {Type: plan.TBool, Bool: true}}},
		{"password without username", saslBroker, "password: set without username", map[string]plan.Value{
			"password": plantest.Tmpl(plantest.Lit(testKafkaPassword))}},
		{"username without password", saslBroker, "username: set without password", map[string]plan.Value{
			"username": plantest.Tmpl(plantest.Lit("mqb"))}},
		{"a mechanism without credentials", saslBroker, "sasl_mechanism: set without username and password", map[string]plan.Value{
			"sasl_mechanism": plantest.Enum("plain")}},
		{"tls off with a ca file", tlsBroker, "tls = false, but a tls_* attribute is set", map[string]plan.Value{
			"tls": {Type: plan.TBool, Bool: false}, "tls_ca_file": plantest.Str(caFile)}},
		{"no credentials", saslBroker, "does it require SASL (username, password)?", map[string]plan.Value{}},
		{"plaintext to a tls listener", tlsBroker, "does it require TLS (tls = true)?", map[string]plan.Value{}},
		{"credentials in the url", saslBroker, "set username and password", map[string]plan.Value{}},
	} {
		for _, side := range []string{"sink", "source"} {
			t.Run(tc.name+"/"+side, func(t *testing.T) {
				e := plantest.NewEnv(t)
				plantest.WriteOrders(t, e.Input, 10)
				brokers := tc.brokers
				if tc.name == "credentials in the url" {
					brokers = "mqb:" + testKafkaPassword + "@" + brokers
				}
				var p plan.Plan
				attrs := map[string]plan.Value{"url": plantest.Str(brokers), "topic": plantest.Str("orders")}
				for k, v := range tc.attrs {
					attrs[k] = v
				}
				if side == "sink" {
					p = plantest.SinkPlan(e.Input, e.State, 16, plan.Node{Kind: "kafka", Attrs: attrs})
				} else {
					p = kafkaSQLitePlan(tc.brokers, "orders", "g", e.State, e.DB, 16, 1)
					for k, v := range attrs {
						p.Routes[0].Nodes[0].Attrs[k] = v
					}
				}
				var logs bytes.Buffer
				opts := runtime.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
				ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
				defer cancel()
				start := time.Now()
				_, err := runtime.Run(ctx, p, opts)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err %v, want %q", err, tc.want)
				}
				if d := time.Since(start); d > 30*time.Second {
					t.Errorf("refused after %v", d)
				}
				if strings.Contains(err.Error(), testKafkaPassword) || strings.Contains(logs.String(), testKafkaPassword) {
					t.Errorf("the password shows in the error or the log: %v\n%s", err, logs.String())
				}
				t.Log(err)
			})
		}
	}
}
