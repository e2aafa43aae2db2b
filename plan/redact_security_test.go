package plan

import (
	"strings"
	"testing"
)

func TestRedactURLs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://mqb:s3cret@db:5432/shop", "postgres://mqb:xxxxx@db:5432/shop"},
		{"connect to nats://u:s3cret@127.0.0.1:4222: refused", "connect to nats://u:xxxxx@127.0.0.1:4222: refused"},
		{"nats://s3cret@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222"},
		{"a tls://s3cret@h:1 and nats://s3cret@h:2", "a tls://xxxxx@h:1 and nats://xxxxx@h:2"},
		{"postgres://mqb@db/shop", "postgres://mqb@db/shop"}, // a user alone is not a secret
		{"mysql://root:@db/shop", "mysql://root:xxxxx@db/shop"},
		{"postgres://db/shop?user=mqb&password=s3cret", "postgres://db/shop?password=xxxxx&user=mqb"},
		{"sqlite://orders.db", "sqlite://orders.db"},
		// A raw "@" in the password: the userinfo ends at the last "@"
		// before the host, so no part of the password is left.
		{"postgres://mqb:P@s3cretAt@@db:5432/shop", "postgres://mqb:xxxxx@db:5432/shop"},
		{"mysql://u:a@s3cret@c@h:3306/db?x=1", "mysql://u:xxxxx@h:3306/db?x=1"},
		{"nats://to@s3cret@h:4222", "nats://xxxxx@h:4222"},
		{"http://u:p@s3cret@h/users/a@b.example", "http://u:xxxxx@h/users/a@b.example"},
		{"postgres://u:ab/s3cret@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:s3cret#1@h/db", "postgres://u:xxxxx@h/db"},
		{`{"url":"postgres://u:p@s3cret@h/db","x":"a@b"}`, `{"url":"postgres://u:xxxxx@h/db","x":"a@b"}`},
		{"url=postgres://u:p@s3cret@h/db other=x@y", "url=postgres://u:xxxxx@h/db other=x@y"},
		{"postgres://mqb@db/a@b", "postgres://mqb@db/a@b"},
		{"http://h:8080/x", "http://h:8080/x"},
	}
	for _, tc := range tests {
		got := RedactURLs(tc.in)
		if got != tc.want {
			t.Errorf("RedactURLs(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("RedactURLs(%q) leaks the secret: %q", tc.in, got)
		}
	}
}

// A value marked secret loses its literal text, in a string or a template,
// while its placeholders stay visible.
func TestRedactedSecretValue(t *testing.T) {
	p := Plan{Routes: []Route{{Name: "r", Nodes: []Node{{Kind: "kafka", Attrs: map[string]Value{
		"password": {Type: TString, Str: "s3cret", Secret: true},
		"username": {Type: TString, Str: "mqb"},
		"token":    {Type: TTemplate, Secret: true, Template: []Part{{Lit: "s3cret-"}, {Expr: `env("TOKEN")`}}},
	}}}}}}
	red := p.Redacted()
	a := red.Routes[0].Nodes[0].Attrs
	if a["password"].Str != "xxxxx" || a["username"].Str != "mqb" {
		t.Errorf("password %q, username %q", a["password"].Str, a["username"].Str)
	}
	if tp := a["token"].Template; tp[0].Lit != "xxxxx" || tp[1].Expr != `env("TOKEN")` {
		t.Errorf("token template %+v", tp)
	}
	if p.Routes[0].Nodes[0].Attrs["password"].Str != "s3cret" {
		t.Errorf("Redacted changed the plan it copied")
	}
}
