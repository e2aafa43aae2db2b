package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// A route whose expressions read the process (env("X"), the local time
// zone) gives a record the same key and the same decisions on a replay
// only while what they read does not change (plan.PremiseProcessUnchanged).
// What matters is the records delivered past the committed position
// before an unclean stop (a crash, SIGKILL, a failed record): the next
// run reads them again. So the engine stores a fingerprint of what the
// route reads beside its checkpoint before the first record, keeps it
// while the route runs, refuses to start when the one stored differs from
// the process's, and forgets it when a run ends with every record it read
// committed: nothing is then replayed, and the next run may read another
// value. `mqbc state reset` forgets it too.

// processKey is the checkpoint-store key the fingerprint of route is kept
// under; a route name is an identifier, so it never takes one of these.
func processKey(route string) string { return route + "#process" }

// processMode marks a stored fingerprint.
const processMode = "process_unchanged"

// processFingerprint fingerprints each of reads (plan.ProcessEnvPrefix +
// NAME, plan.ProcessLocalZone, plan.ProcessTZDatabase) as the process
// sees it now: a hash, so a secret in the environment is not copied into
// the store.
func processFingerprint(reads []string, env func(string) string) map[string]string {
	if env == nil {
		env = os.Getenv
	}
	fp := make(map[string]string, len(reads))
	for _, r := range reads {
		var v string
		switch {
		case strings.HasPrefix(r, plan.ProcessEnvPrefix):
			v = "=" + env(strings.TrimPrefix(r, plan.ProcessEnvPrefix))
		case r == plan.ProcessLocalZone:
			// The zone's name and offset at the solstices of a few years
			// stand for its rules.
			for _, y := range []int{2000, 2025, 2030} {
				for _, m := range []time.Month{time.January, time.July} {
					name, off := time.Date(y, m, 1, 12, 0, 0, 0, time.Local).Zone()
					v += fmt.Sprintf("%s%d;", name, off)
				}
			}
		case r == plan.ProcessTZDatabase:
			v = "ZONEINFO=" + os.Getenv("ZONEINFO") + ";" + tzdataVersion()
		default:
			v = "unknown:" + r
		}
		h := sha256.Sum256([]byte(r + "\x00" + v))
		fp[r] = hex.EncodeToString(h[:8])
	}
	return fp
}

// tzdataVersion is the version line of the system's time zone database,
// "" when there is none to read (Go's embedded copy, if linked in, is
// fixed by the binary).
func tzdataVersion() string {
	b, err := os.ReadFile("/usr/share/zoneinfo/tzdata.zi")
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

// checkProcess checks p against the fingerprint the route stored, and
// stores the process's when there is none (not in a Check run, which
// writes nothing).
func (rt *route) checkProcess(ctx context.Context, p plan.Premise) error {
	if rt.processStore == nil {
		return fmt.Errorf("the route has no store to keep what it read from the process in")
	}
	now := processFingerprint(p.Columns, rt.env)
	key := processKey(rt.name)
	report, _ := ctx.Value(premiseReportKey{}).(*premiseReport)
	load := rt.processStore.Load // takes the key over, as a run does
	if report != nil {
		load = rt.processStore.Peek // a check writes nothing
	}
	pos, found, err := load(key)
	if err != nil {
		return err
	}
	stored := map[string]string{}
	if found {
		if pos.Mode != processMode || json.Unmarshal([]byte(pos.Source), &stored) != nil {
			return fmt.Errorf("%s holds %q under %s, which is not a fingerprint this runtime wrote", rt.processStore.Where(), pos.Source, key)
		}
	}
	var changed []string
	for _, r := range p.Columns {
		if old, ok := stored[r]; ok && old != now[r] {
			changed = append(changed, describeProcessRead(r))
		}
	}
	if len(changed) > 0 {
		slices.Sort(changed)
		fix := "start it with the value it had, let it drain (SIGTERM, or the end of its input) and then change it"
		if rt.cp != nil {
			fix += "; or forget its position with mqbc state reset " + rt.name + " (it then reads its source from the start)"
		}
		return &premiseFailure{
			Found: fmt.Sprintf("%s changed since route %s last stopped with records in flight: the records it delivered then would be read again and keyed or decided anew, landing twice", strings.Join(changed, ", "), rt.name),
			Fix:   fix,
		}
	}
	rt.processFP = now
	if report != nil {
		return nil
	}
	merged := now
	if found {
		merged = stored
		for r, v := range now {
			merged[r] = v
		}
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return err
	}
	return rt.processStore.Save(key, checkpoint.Position{Source: string(b), Mode: processMode})
}

// forgetProcess drops the stored fingerprint once a run has committed
// every record it read.
func (rt *route) forgetProcess() error {
	if rt.processFP == nil || rt.processStore == nil {
		return nil
	}
	if err := rt.processStore.Delete(processKey(rt.name)); err != nil {
		return fmt.Errorf("route %s: %w", rt.name, err)
	}
	return nil
}

// describeProcessRead names r for people.
func describeProcessRead(r string) string {
	if name, ok := strings.CutPrefix(r, plan.ProcessEnvPrefix); ok {
		return fmt.Sprintf("env(%q)", name)
	}
	return "the " + r
}
