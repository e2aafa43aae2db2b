package file

import (
	"context"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// TestMain stops the servers testsrv started when the package's tests
// end.
func TestMain(m *testing.M) { testsrv.Main(m) }

// The plan-building and run helpers are plantest's and runtest's, shared
// with the engine's tests.
var (
	strV       = plantest.Str
	enumV      = plantest.Enum
	intV       = plantest.Int
	chain      = plantest.Chain
	runRefused = runtest.RunRefused
	startRun   = runtest.Start
	fileRoute  = plantest.FileRoute
	readLines  = plantest.ReadLines
)

func testOptions(testing.TB) runtime.Options { return runtest.Options() }

// runRoute runs p to its end and returns route's stats, whose counts must
// add up.
func runRoute(t testing.TB, p plan.Plan, route string) runtime.RouteStats {
	t.Helper()
	return runtest.RunRoute(t, context.Background(), p, runtest.Options(), route)
}
