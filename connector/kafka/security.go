package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// kafkaSecurity is how a kafka endpoint connects to its brokers: TLS and a
// SASL mechanism, both optional, from the endpoint's attributes. Every
// connection the endpoint opens (metadata, produce, fetch, the consumer
// group's) goes through one of its dialer or transport.
type kafkaSecurity struct {
	tls  *tls.Config
	sasl sasl.Mechanism
}

// kafkaSecurityConfig is the attributes kafkaSecurityFrom reads, on both
// ends. Two have no default on purpose, because unset says something a
// value cannot: sasl_mechanism unset is plain, but only with a user name
// and password (a mechanism written without them is refused), and tls
// unset is on exactly when a tls_* attribute is set (tls = false with one
// is refused).
type kafkaSecurityConfig struct {
	Username      []plan.Part `attr:"username"` // rendered by renderStatic (env() allowed)
	Password      []plan.Part `attr:"password"` // likewise
	SASLMechanism string      `attr:"sasl_mechanism"`
	TLS           *plan.Value `attr:"tls"`
	TLSCAFile     string      `attr:"tls_ca_file"`
	TLSCertFile   string      `attr:"tls_cert_file"`
	TLSKeyFile    string      `attr:"tls_key_file"`
	TLSSkipVerify bool        `attr:"tls_skip_verify"`
}

// kafkaSecurityFrom builds the TLS and SASL settings of cfg; relative file
// paths resolve against the .mqb file's directory.
func kafkaSecurityFrom(b *runtime.BuildEnv, cfg *kafkaSecurityConfig) (kafkaSecurity, error) {
	var sec kafkaSecurity
	user, pass := "", ""
	var err error
	if cfg.Username != nil {
		if user, err = b.RenderStatic("username"); err != nil { // env() rendered
			return sec, err
		}
	}
	if cfg.Password != nil {
		if pass, err = b.RenderStatic("password"); err != nil {
			return sec, err
		}
	}
	switch {
	case user == "" && pass != "":
		return sec, b.Errorf("password", "set without username")
	case user != "" && pass == "":
		return sec, b.Errorf("username", "set without password (an empty password is refused: set it, e.g. from env())")
	case user == "" && cfg.SASLMechanism != "":
		return sec, b.Errorf("sasl_mechanism", "set without username and password")
	case user != "":
		switch mech := cfg.SASLMechanism; mech {
		case "", "plain": // unset is plain (stdlib's doc says so)
			sec.sasl = plain.Mechanism{Username: user, Password: pass}
		case "scram_sha_256", "scram_sha_512":
			algo := scram.SHA256
			if mech == "scram_sha_512" {
				algo = scram.SHA512
			}
			m, err := scram.Mechanism(algo, user, pass)
			if err != nil {
				return sec, b.Errorf("sasl_mechanism", "%s: %v", mech, err)
			}
			sec.sasl = m
		default:
			return sec, b.Errorf("sasl_mechanism", "unknown mechanism %q", mech)
		}
	}

	path := func(p string) string {
		if p != "" && !filepath.IsAbs(p) && b.BaseDir() != "" {
			p = filepath.Join(b.BaseDir(), p)
		}
		return p
	}
	ca, cert, key := path(cfg.TLSCAFile), path(cfg.TLSCertFile), path(cfg.TLSKeyFile)
	skip := cfg.TLSSkipVerify
	on := (cfg.TLS != nil && cfg.TLS.Bool) || ca != "" || cert != "" || key != "" || skip
	if cfg.TLS != nil && !cfg.TLS.Bool && on {
		return sec, b.Errorf("tls", "tls = false, but a tls_* attribute is set")
	}
	if !on {
		return sec, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: skip}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return sec, b.Errorf("tls_ca_file", "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return sec, b.Errorf("tls_ca_file", "%s holds no PEM certificate", ca)
		}
		tc.RootCAs = pool
	}
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return sec, b.Errorf("tls_cert_file", "%v", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	case cert != "":
		return sec, b.Errorf("tls_cert_file", "set without tls_key_file")
	case key != "":
		return sec, b.Errorf("tls_key_file", "set without tls_cert_file")
	}
	sec.tls = tc
	return sec, nil
}

// dialer is for kafka-go's Reader and ConsumerGroup.
func (k kafkaSecurity) dialer() *kafkago.Dialer {
	return &kafkago.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: k.tls, SASLMechanism: k.sasl}
}

// transport is for kafka-go's Client.
func (k kafkaSecurity) transport() *kafkago.Transport {
	return &kafkago.Transport{DialTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, ClientID: "mqb", TLS: k.tls, SASL: k.sasl}
}

// kafkaAuthError rewrites the errors a broker gives a client that did not
// authenticate into one line saying so: kafka-go reports a TLS client
// talking to a plaintext broker (and the reverse) as an EOF or a
// malformed response.
func kafkaAuthError(err error, sec kafkaSecurity) error {
	var kerr kafkago.Error
	if errors.As(err, &kerr) {
		switch kerr {
		case kafkago.SASLAuthenticationFailed, kafkago.UnsupportedSASLMechanism, kafkago.IllegalSASLState:
			return fmt.Errorf("SASL authentication failed (check username, password and sasl_mechanism): %w", err)
		}
	}
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return fmt.Errorf("the broker's TLS certificate is not trusted (set tls_ca_file to its CA): %w", err)
	}
	// A broker closes the connection on a client that failed SASL, and a
	// TLS listener on one that speaks plaintext: kafka-go sees an EOF.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		var hints []string
		if sec.sasl != nil {
			hints = append(hints, "SASL authentication failed? check username, password and sasl_mechanism")
		} else {
			hints = append(hints, "does it require SASL (username, password)?")
		}
		if sec.tls == nil {
			hints = append(hints, "does it require TLS (tls = true)?")
		}
		return fmt.Errorf("the broker closed the connection (%s): %w", strings.Join(hints, "; "), err)
	}
	return err
}
