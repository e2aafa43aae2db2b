package kafka

import (
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestMain stops the servers the tests shared and clears the package's
// .mqb (testsrv.Main).
func TestMain(m *testing.M) { testsrv.Main(m) }
