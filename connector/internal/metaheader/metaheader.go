// Package metaheader turns record metadata into HTTP header fields the
// same way wherever mqb sends them (the http sink's Mqb-Meta-<key>
// request headers, the http_server source's reply headers): a key of any
// bytes becomes a valid, reversible header name, and a value can never
// break the header block.
package metaheader

import (
	"fmt"
	"strings"
)

// Name is prefix followed by key, with every byte of key that is not a
// header-name character, and '%', sent as %XX.
func Name(prefix, key string) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(key))
	b.WriteString(prefix)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if isNameByte(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// isNameByte reports whether c is an RFC 9110 token character other
// than '%'.
func isNameByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&'*+-.^_`|~", c) >= 0
}

// Value is v as is, unless it holds a control character (a header cannot
// carry CR or LF): those, and then '%', are percent-encoded.
func Value(v string) string {
	clean := true
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x20 && c != '\t') || c == 0x7f || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
