package runtime

import (
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

// A templated store url is refused rather than read as unset (which would
// keep the state in the default Pebble directory).
func TestStoreURLTemplateRefused(t *testing.T) {
	a := nodeAttrs{route: "r", node: &plan.Node{Kind: "dedup", Role: plan.RoleStep, Attrs: map[string]plan.Value{
		"store": plantest.Tmpl(plantest.Ex(`env("DEDUP_URL")`))}}}
	if _, err := openDedupStore(a, &Options{}, "route/r"); err == nil || !strings.Contains(err.Error(), "attribute store") {
		t.Errorf("err %v: want the templated store refused", err)
	}
}
