package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// reasonTally is the -reasons mode: it builds the generated file of every
// seed (nothing runs) and prints how often each verdict reason occurs,
// with table names, numbers and quoted values blanked so that the reasons
// of one prover rule count together. It shows which rules of the prover
// the generator reaches.
func reasonTally(mqbc, tmp string, first uint64, seeds, kills int, stdout, stderr io.Writer) int {
	count := map[string]int{}
	verdicts := map[string]int{}
	rejected := 0
	for s := first; s < first+uint64(seeds); s++ {
		c, err := generateFrom(s, kills, forceSource)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		dir, err := prepare(tmp, c, c.Source)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		ck := &Checker{Mqbc: mqbc}
		vs, err := ck.build(dir)
		closeServerDBs(dir)
		os.RemoveAll(dir)
		if err != nil {
			rejected++
			for _, l := range strings.Split(err.Error(), "\n") {
				count["REJECTED "+blankReason(l)]++
			}
			continue
		}
		for _, v := range vs {
			verdicts[v.Guarantee]++
			for _, r := range v.Reasons {
				count[v.Guarantee+": "+blankReason(r)]++
			}
		}
	}
	var lines []string
	for r, n := range count {
		lines = append(lines, fmt.Sprintf("%5d  %s", n, r))
	}
	slices.Sort(lines)
	fmt.Fprintln(stdout, strings.Join(lines, "\n"))
	fmt.Fprintf(stdout, "verdicts %v, rejected files %d\n", verdicts, rejected)
	return 0
}

var (
	blankQuoted = regexp.MustCompile(`"[^"]*"|'[^']*'|\$\{[^}]*\}`)
	blankName   = regexp.MustCompile(`\b(route_[a-c]|t\d+|out/[^ ,;)]*|\d+)\b`)
)

func blankReason(r string) string {
	r = blankQuoted.ReplaceAllString(r, "…")
	return blankName.ReplaceAllString(r, "#")
}
