package all_test

import (
	"strings"
	"testing"

	_ "github.com/mqb-dev/mqb/connector/all"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/stdlib"
)

// Every kind stdlib declares as a source or sink has a builder, and every
// builder's config struct agrees with stdlib: each field names a declared
// attribute, and the source and sink configs of a kind together read every
// attribute it declares. Defaults live only in stdlib (the runtime's
// config decoder applies them), so a connector cannot drift from the
// documentation. The test links every connector through package all, so it
// reads the registry mqbc runs with, the kinds outside runtime included.
func TestRegistryAgreesWithStdlib(t *testing.T) {
	type end struct{ kind, end string }
	registered := map[end]runtime.Registered{}
	for _, r := range runtime.Registrations() {
		registered[end{r.Kind, r.End}] = r
	}
	for _, name := range stdlib.KindNames() {
		k, _ := stdlib.LookupKind(name)
		src, hasSrc := registered[end{name, stdlib.EndSource}]
		snk, hasSink := registered[end{name, stdlib.EndSink}]
		// stdlib's Unimplemented is the list of declared ends without a
		// builder; an end in it that has one is a stale note.
		runsSrc := k.Source && k.Unimplemented[stdlib.EndSource] == ""
		runsSink := k.Sink && k.Unimplemented[stdlib.EndSink] == ""
		if runsSrc != hasSrc {
			t.Errorf("%s: stdlib says the source runs: %v, the registry has a source builder: %v", name, runsSrc, hasSrc)
		}
		if runsSink != hasSink {
			t.Errorf("%s: stdlib says the sink runs: %v, the registry has a sink builder: %v", name, runsSink, hasSink)
		}
		// Each end's config reads exactly the attributes that apply to
		// that end: one it skips would be accepted by the compiler and
		// ignored at run time.
		ends := []struct {
			end string
			reg runtime.Registered
			has bool
		}{{stdlib.EndSource, src, hasSrc}, {stdlib.EndSink, snk, hasSink}}
		for _, e := range ends {
			if !e.has {
				continue
			}
			read := map[string]bool{}
			for _, attr := range e.reg.Attrs {
				a := k.Attr(attr)
				switch {
				case a == nil:
					t.Errorf("%s: config %s reads %q, which stdlib does not declare", name, e.reg.Config, attr)
				case a.End != "" && a.End != e.end:
					t.Errorf("%s %s: config %s reads %q, which stdlib declares for the %s only", name, e.end, e.reg.Config, attr, a.End)
				}
				read[attr] = true
			}
			for _, a := range k.Attrs {
				if (a.End == "" || a.End == e.end) && !read[a.Name] {
					t.Errorf("%s %s: stdlib declares %q for it, but its config %s does not read it (declare End: the other end, or read it)", name, e.end, a.Name, e.reg.Config)
				}
			}
		}
		for _, a := range k.Attrs {
			if a.End == stdlib.EndSource && !k.Source || a.End == stdlib.EndSink && !k.Sink {
				t.Errorf("%s: %q is declared for the %s, which the kind does not have", name, a.Name, a.End)
			}
		}
	}
	for _, r := range runtime.Registrations() {
		k, ok := stdlib.LookupKind(r.Kind)
		if r.End == stdlib.EndSource && (!ok || !k.Source) {
			t.Errorf("source %s is registered but stdlib declares no such source", r.Kind)
		}
		if r.End == stdlib.EndSink && (!ok || !k.Sink) {
			t.Errorf("sink %s is registered but stdlib declares no such sink", r.Kind)
		}
	}
}

// TestPremiseDeclarations: the premise kinds each end's registration
// declares are the allow-list the engine checks premises against (a
// premise on a node whose kind declares no check for it refuses the
// route). This is the list as it stood when the engine still named the
// kinds; a change to it changes which verdicts a route can be run under.
func TestPremiseDeclarations(t *testing.T) {
	type decl struct{ checks, arms, holds string }
	want := map[string]decl{
		"sql sink":        {checks: plan.PremiseNoTriggers + " " + plan.PremiseRepeatInsertable + " " + plan.PremiseReplaceStableColumns + " " + plan.PremiseTransactionalTable + " " + plan.PremiseUniqueKey + " " + plan.PremiseUpdateLeavesUniques, arms: plan.PremiseKeyPresent},
		"clickhouse sink": {checks: plan.PremiseNoTriggers + " " + plan.PremiseReplacingMergeTree, arms: plan.PremiseKeyPresent},
		"mongodb sink":    {checks: plan.PremiseUniqueIndex, arms: plan.PremiseKeyPresent},
		"kafka sink":      {holds: plan.PremiseKeyPresent},
		"nats sink":       {holds: plan.PremiseKeyPresent},
		// s3:// buckets are probed for If-None-Match at start-up.
		"object_store sink": {checks: plan.PremisePutIfAbsent},
		// Every published table has a primary key (snapshot = true).
		"postgres_cdc source": {checks: plan.PremisePrimaryKey},
		// The queue drops no message by itself (its flags and arguments).
		"amqp source": {checks: plan.PremiseQueueKeepsMessages},
		// The JetStream stream removes no message by itself (its limits).
		"nats source": {checks: plan.PremiseStreamKeepsMessages},
	}
	for _, r := range runtime.Registrations() {
		name := r.Kind + " " + r.End
		got := decl{strings.Join(r.ChecksPremises, " "), strings.Join(r.ArmsPremises, " "), strings.Join(r.HoldsPremises, " ")}
		if got != want[name] {
			t.Errorf("%s declares %+v, want %+v", name, got, want[name])
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("%s is not registered", name)
	}
}
