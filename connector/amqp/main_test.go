package amqp

import (
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

func TestMain(m *testing.M) { testsrv.Main(m) }
