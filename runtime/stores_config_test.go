package runtime

import (
	"testing"

	"github.com/mqb-dev/mqb/stdlib"
)

// checkpointOnlyWhenWritten lists the sources that keep a position in a
// checkpoint store only when checkpoint_store is written (postgres_cdc's
// slot holds its position otherwise, see connector/postgrescdc), so they
// need no default. The test reads stdlib's declarations only, so it stays
// with openCheckpointStore here.
var checkpointOnlyWhenWritten = map[string]bool{"postgres_cdc": true}

// serverKeepsPosition lists the sources whose server keeps the position
// and which commit by acknowledging, with no checkpoint store at all:
// redis's consumer group holds what was delivered, its pending entries
// are read again on start, and an entry's position is its id.
var serverKeepsPosition = map[string]bool{"redis": true}

// Every source with a position declares checkpoint_store with a default:
// openCheckpointStore takes the default from stdlib and has none of its own.
func TestPositionalSourcesDeclareCheckpointStore(t *testing.T) {
	for _, name := range stdlib.KindNames() {
		k, _ := stdlib.LookupKind(name)
		if !k.Source || len(k.PositionModes) == 0 || k.Unimplemented[stdlib.EndSource] != "" {
			continue
		}
		a := k.Attr("checkpoint_store")
		switch {
		case a == nil && serverKeepsPosition[name]:
		case a == nil:
			t.Errorf("source %s keeps a position but declares no checkpoint_store", name)
		case a.Default == nil && !checkpointOnlyWhenWritten[name]:
			t.Errorf("source %s: checkpoint_store has no default", name)
		}
	}
}
