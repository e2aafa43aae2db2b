package testsrv

import (
	"os"
	"slices"
	"strings"
)

// HideEnv names servers to treat as not installed, comma-separated
// (postgres, mariadb, clickhouse), whatever the machine has: the Debian
// servers are found at fixed paths, not on PATH, so hiding them from PATH
// would not do. .ci/extra.d/hidden-servers.sh runs tests this way to check
// that a machine without them skips cleanly instead of failing.
const HideEnv = "MQB_TESTSRV_HIDE"

// hidden reports whether server is hidden by HideEnv.
func hidden(server string) bool {
	return slices.Contains(strings.Split(os.Getenv(HideEnv), ","), server)
}
