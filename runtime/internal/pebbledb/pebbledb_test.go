package pebbledb

import (
	"strings"
	"testing"
)

// TestFatalNamesTheStore: a fatal error Pebble reports through its logger
// (from a background flush, say) ends the process with a line naming the
// store's directory, even when Pebble's own message names no file.
func TestFatalNamesTheStore(t *testing.T) {
	dir := t.TempDir()
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var got string
	old := fatal
	fatal = func(msg string) { got = msg; panic("fatal") }
	defer func() { fatal = old }()
	for _, pebbleMsg := range []string{"MANIFEST sync failed: %v", "pebble: fatal commit error: %v"} {
		got = ""
		func() {
			defer func() { recover() }()
			options(dir).Logger.Fatalf(pebbleMsg, "input/output error")
		}()
		if !strings.HasPrefix(got, "mqb: pebble store "+dir+": ") || !strings.Contains(got, "input/output error") || strings.Contains(got, "pebble: pebble:") {
			t.Errorf("Fatalf(%q): the process ends with %q: want a first line naming the store %s and the cause", pebbleMsg, got, dir)
		}
	}
}
