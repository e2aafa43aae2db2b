package compiler

import "fmt"

// suggest returns the candidate closest to name by edit distance, if it is
// close enough to be a plausible typo (as HCL's didyoumean does).
func suggest(name string, candidates []string) string {
	// Like HCL: at most two edits, and fewer edits than the name is long.
	best, bestDist := "", min(3, len(name))
	for _, c := range candidates {
		if d := levenshtein(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// didYouMean renders a detail line for suggest's answer, or "".
func didYouMean(name string, candidates []string) string {
	if s := suggest(name, candidates); s != "" {
		return fmt.Sprintf("did you mean %q?", s)
	}
	return ""
}

func levenshtein(a, b string) int {
	if a == b {
		return 0
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
