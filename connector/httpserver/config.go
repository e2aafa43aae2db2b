package httpserver

import (
	"crypto/tls"
	"path/filepath"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// serverConfig is an http_server source's attributes (stdlib declares
// them and their defaults).
type serverConfig struct {
	Address      string      `attr:"address"`
	Path         string      `attr:"path"`
	MaxBodyBytes int64       `attr:"max_body_bytes"`
	ProducerIDs  bool        `attr:"producer_ids"`
	Username     []plan.Part `attr:"username"` // rendered by RenderStatic (env() allowed)
	Password     []plan.Part `attr:"password"` // likewise
	TLSCertFile  string      `attr:"tls_cert_file"`
	TLSKeyFile   string      `attr:"tls_key_file"`
	Format       string      `attr:"format"`
	RequestReply bool        `attr:"request_reply"`
}

func init() {
	runtime.RegisterSource("http_server", build)
}

func build(b *runtime.BuildEnv, cfg *serverConfig) (runtime.Source, error) {
	s := newSource(b.Route(), b.Logger())
	s.address, s.path, s.maxBody, s.format = cfg.Address, cfg.Path, cfg.MaxBodyBytes, cfg.Format
	if s.address == "" {
		return nil, b.Errorf("address", "required: the host:port to listen on")
	}
	if s.path == "" || s.path[0] != '/' {
		return nil, b.Errorf("path", "must start with /, got %q", s.path)
	}
	if s.maxBody <= 0 {
		return nil, b.Errorf("max_body_bytes", "must be positive, got %d", s.maxBody)
	}
	switch s.format {
	case "json", "text", "raw":
	default:
		return nil, b.Errorf("format", "format %q is not supported by the http_server source", s.format)
	}
	var err error
	if s.auth, err = basicAuth(b, cfg); err != nil {
		return nil, err
	}
	if s.tls, err = serverTLS(b, cfg); err != nil {
		return nil, err
	}
	if cfg.RequestReply {
		s.replies = map[uint64]*request{}
		return &replyingSource{s}, nil
	}
	return s, nil
}

// basicAuth reads username and password: both or neither.
func basicAuth(b *runtime.BuildEnv, cfg *serverConfig) (*credentials, error) {
	if cfg.Username == nil && cfg.Password == nil {
		return nil, nil
	}
	var user, pass string
	var err error
	if cfg.Username != nil {
		if user, err = b.RenderStatic("username"); err != nil {
			return nil, err
		}
	}
	if cfg.Password != nil {
		if pass, err = b.RenderStatic("password"); err != nil {
			return nil, err
		}
	}
	switch {
	case user == "":
		return nil, b.Errorf("username", "password is set but username is empty")
	case pass == "":
		return nil, b.Errorf("password", "username is set but password is empty (an empty password is refused: set it, e.g. from env())")
	}
	return newCredentials(user, pass), nil
}

// serverTLS loads tls_cert_file and tls_key_file (both or neither),
// relative to the .mqb file.
func serverTLS(b *runtime.BuildEnv, cfg *serverConfig) (*tls.Config, error) {
	path := func(p string) string {
		if p != "" && !filepath.IsAbs(p) && b.BaseDir() != "" {
			p = filepath.Join(b.BaseDir(), p)
		}
		return p
	}
	cert, key := path(cfg.TLSCertFile), path(cfg.TLSKeyFile)
	switch {
	case cert == "" && key == "":
		return nil, nil
	case key == "":
		return nil, b.Errorf("tls_cert_file", "set without tls_key_file")
	case cert == "":
		return nil, b.Errorf("tls_key_file", "set without tls_cert_file")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, b.Errorf("tls_cert_file", "%v", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}, nil
}
