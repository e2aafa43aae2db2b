package testsrv

import (
	"strings"
	"testing"
)

// recordingTB records how a helper gave up instead of ending the test.
type recordingTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skip(args ...any) {
	r.skipped = args[0].(string)
}
func (r *recordingTB) Fatal(args ...any) {
	r.failed = args[0].(string)
}

func TestUnavailableSkipsOrFailsOnCI(t *testing.T) {
	t.Setenv("CI", "")
	r := &recordingTB{TB: t}
	unavailable(r, "mariadb-server", "MariaDB server not found")
	if r.failed != "" || !strings.Contains(r.skipped, "apt-get install -y mariadb-server") {
		t.Fatalf("without CI: skipped %q, failed %q", r.skipped, r.failed)
	}

	t.Setenv("CI", "true")
	r = &recordingTB{TB: t}
	unavailable(r, "mariadb-server", "MariaDB server not found")
	if r.skipped != "" || !strings.Contains(r.failed, "MariaDB server not found") {
		t.Fatalf("with CI=true: skipped %q, failed %q", r.skipped, r.failed)
	}
}

func TestDBName(t *testing.T) {
	if got := dbName(t, 3); got != "t_testdbname_3" {
		t.Fatalf("dbName = %q", got)
	}
	t.Run("Sub Test/with-odd chars and a very long name that goes on", func(t *testing.T) {
		got := dbName(t, 12)
		if len(got) > 64 || strings.ContainsAny(got, " /-") || !strings.HasSuffix(got, "_12") {
			t.Fatalf("dbName = %q", got)
		}
	})
}
