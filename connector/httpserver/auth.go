package httpserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
)

// credentials are the basic-auth user name and password a request must
// carry, kept as digests: comparing digests of equal length in constant
// time tells an attacker nothing of either value, its length included.
type credentials struct {
	user, pass [sha256.Size]byte
}

func newCredentials(user, pass string) *credentials {
	return &credentials{user: sha256.Sum256([]byte(user)), pass: sha256.Sum256([]byte(pass))}
}

// allows reports whether req carries the credentials. Both are compared
// whatever the first comparison found.
func (c *credentials) allows(req *http.Request) bool {
	user, pass, ok := req.BasicAuth()
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	userOK := subtle.ConstantTimeCompare(u[:], c.user[:])
	passOK := subtle.ConstantTimeCompare(p[:], c.pass[:])
	return ok && userOK&passOK == 1
}
