//go:build soundness

package main

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// An object store sink reads back as a directory of part files, from a
// file:// prefix or from the S3 emulator's mirror: told the truth, parts
// named by source position hold every record once under kills, and parts
// named by write time on S3, planted as effectively-once, are reported
// with the records a replay wrote again.
func TestObjectStoreCatchesPlanted(t *testing.T) {
	for _, url := range []string{"file://out/r__o1", "s3://sink/out/r__o1"} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			src := `route r {
  batch_size = 64
  from file { path = "in.jsonl" }
  dlq { to file { path = "out/r.dlq.jsonl" } }
  to object_store { url = "URL", path_style = true, name_by = NAMING }
}
`
			src = strings.Replace(src, "URL", url, 1)
			art := Artifact{Kind: "parts", Path: "out/r__o1", Group: "out/r__o1"}
			res := checkUntilKilled(t, rulesCase("objstore-truth", 51, strings.Replace(src, "NAMING", "auto", 1), art))
			if g := res.Verdicts[0].Guarantee; g != effectivelyOnce {
				t.Errorf("the compiler calls object_store name_by = auto over a file %s, want effectively-once", g)
			}
			if len(res.Findings) > 0 {
				t.Errorf("effectively-once, yet:\n%s", report(res))
			}
			if strings.HasPrefix(url, "file:") {
				// (A local put and the commit after it are so close that
				// six seeds' kills landed none between them.)
				return
			}
			// Batches of 4 (a put each) over 40,000 records: with 64 over
			// 10,000 the run ended before any of its kills once the
			// runtime got faster.
			planted := strings.Replace(strings.Replace(src, "NAMING", "write_time", 1), "batch_size = 64", "batch_size = 4", 1)
			c := rulesCase("planted-objstore", 61, planted, art)
			c.Input = genData(rand.New(rand.NewPCG(61, 61)), 40000)
			c.Routes[0].Override = effectivelyOnce
			// (Caught with extra lines in the prefix: its objects were
			// read back.)
			wantCaught(t, c, "")
		})
	}
}
