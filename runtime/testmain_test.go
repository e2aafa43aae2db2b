package runtime_test

import (
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestMain stops the servers testsrv started (PostgreSQL, MariaDB, …) when
// the package's tests end.
func TestMain(m *testing.M) { testsrv.Main(m) }
