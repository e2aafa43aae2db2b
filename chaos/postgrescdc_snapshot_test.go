//go:build chaos

package chaos

import (
	"fmt"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// pgCDCSnapshotSource is postgres_cdc with snapshot = true and no slot made
// ahead: the first chunk is in table src before the route first starts,
// so the first runs read it as the snapshot (the route creates the slot,
// exporting its snapshot) and kills land in it; later chunks are written
// while runs go and stream. A run killed mid-snapshot leaves the rest to
// be read in a new snapshot, the stream from the slot's start bringing
// what changed since; the key-addressed sink absorbs a row both read late
// and streamed.
var pgCDCSnapshotSource = sourceCase{name: "postgres_cdc snapshot", follows: true, noDedup: true, setup: func(t *testing.T, dir string) sourceSetup {
	url := testsrv.Postgres(t)
	h := openPostgres(t, url, srcTable, `CREATE PUBLICATION mqb_chaos FOR TABLE src`)
	return sourceSetup{
		from: fmt.Sprintf(`postgres_cdc { url = %q, publication = "mqb_chaos", slot_name = "mqb_chaos_snap", snapshot = true, checkpoint_store = "pebble://state/cdc" }`, url),
		emit: cdcInserts(t, h, true)}
}}
