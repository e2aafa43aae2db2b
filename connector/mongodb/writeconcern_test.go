package mongodb

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestSinkWriteConcern: the sink's client waits for a write to be in the
// journal of a majority of the replica set, unless the url names its own
// write concern, which is kept.
func TestSinkWriteConcern(t *testing.T) {
	db := testsrv.MongoDB(t)
	sep := "?"
	if strings.Contains(db.URL, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		url     string
		w       any
		journal bool
	}{
		{db.URL, writeconcern.WCMajority, true},
		{db.URL + sep + "w=1", 1, false},
	} {
		opts, err := mongoOptions(c.url)
		if err != nil {
			t.Fatal(err)
		}
		wc := opts.WriteConcern
		if wc == nil || wc.W != c.w || (wc.Journal != nil && *wc.Journal) != c.journal {
			t.Errorf("%s: write concern %+v, want w %v journal %v", c.url, wc, c.w, c.journal)
		}
	}
}
