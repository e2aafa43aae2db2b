package runtime

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseLogfmt(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{`level=info msg="user logged in" user=42 admin`, `map[admin:true level:info msg:user logged in user:42]`, ""},
		{`a="x \"quoted\" y" b=`, `map[a:x "quoted" y b:]`, ""},
		{`  spaced=1   out=2  `, `map[out:2 spaced:1]`, ""},
		{`k=1 k=2`, `map[k:2]`, ""},
		{``, `map[]`, ""},
		{`msg="never closed`, "", "no closing quote"},
		{`=value`, "", "has no key"},
		{`ke"y=1`, "", "cannot hold a quote"},
	} {
		got, err := parseLogfmt(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseLogfmt(%q): err %v, want %q", tc.in, err, tc.err)
			}
		case err != nil || fmt.Sprint(got) != tc.want:
			t.Errorf("parseLogfmt(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
