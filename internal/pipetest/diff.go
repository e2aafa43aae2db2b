package pipetest

import (
	"encoding/json"
	"strings"
)

// canonical rewrites each line that is JSON in one spelling (compact,
// object keys sorted), so that spacing and key order do not count.
func canonical(ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		var v any
		if err := json.Unmarshal([]byte(l), &v); err == nil {
			if b, err := json.Marshal(v); err == nil {
				out[i] = string(b)
				continue
			}
		}
		out[i] = strings.TrimSpace(l)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// diff is a line diff of want and got by their longest common
// subsequence: `- ` a line only wanted, `+ ` a line only got, `  ` both.
func diff(want, got []string) string {
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && want[i] == got[j]:
			b.WriteString("      " + want[i] + "\n")
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			b.WriteString("    - " + want[i] + "\n")
			i++
		default:
			b.WriteString("    + " + got[j] + "\n")
			j++
		}
	}
	return b.String()
}
