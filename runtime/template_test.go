package runtime

import (
	"strings"
	"testing"
)

func TestForwardedMeta(t *testing.T) {
	r := &Record{Meta: map[string]string{"mqb.src.topic": "in", "mqb.src.offset": "4", "mqb.id": "A-1", "trace": "x"}}
	if got := strings.Join(forwardedMeta(r), ","); got != "mqb.id,trace" {
		t.Errorf("forwarded %s, want mqb.id,trace", got)
	}
}
