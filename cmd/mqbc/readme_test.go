package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmeBlock is one fenced block of the README: its info string, its
// lines and the line of the README it starts on.
type readmeBlock struct {
	info  string
	lines []string
	line  int
}

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	var cur *readmeBlock
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &readmeBlock{info: strings.TrimPrefix(l, "```"), line: i + 1}
		case cur != nil && l == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		}
	}
	if cur != nil {
		t.Fatalf("README.md:%d: fenced block never closed", cur.line)
	}
	return blocks
}

// TestREADME builds what the README shows: every block that is a pipeline
// builds without error, and every `$ mqbc build FILE` transcript prints
// what the binary prints (FILE from the repository, or from a `$ cat FILE`
// earlier in the same block).
func TestREADME(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pipelines, transcripts := 0, 0
	for _, b := range readmeBlocks(t) {
		if len(b.lines) == 0 || b.info != "" {
			continue
		}
		if strings.HasPrefix(b.lines[0], "route ") {
			pipelines++
			dir := t.TempDir()
			write(t, dir, "readme.mqb", strings.Join(b.lines, "\n")+"\n")
			if _, errs, code := mqbc(t, dir, "build", "readme.mqb"); code != exitOK {
				t.Errorf("README.md:%d: the pipeline does not build (exit %d):\n%s", b.line, code, errs)
			}
			continue
		}
		dir := t.TempDir()
		for i := 0; i < len(b.lines); i++ {
			cmd, ok := strings.CutPrefix(b.lines[i], "$ ")
			if !ok {
				continue
			}
			j := i + 1
			for j < len(b.lines) && !strings.HasPrefix(b.lines[j], "$ ") {
				j++
			}
			out := strings.Join(b.lines[i+1:j], "\n")
			switch f := strings.Fields(cmd); {
			case len(f) == 2 && f[0] == "cat":
				write(t, dir, f[1], out+"\n")
			case len(f) == 3 && f[0] == "mqbc" && f[1] == "build":
				transcripts++
				wd := dir
				if _, err := os.Stat(filepath.Join(root, f[2])); err == nil {
					wd = root
				}
				stdout, stderr, _ := mqbc(t, wd, "build", f[2])
				if got := strings.TrimRight(stdout+stderr, "\n"); got != out {
					t.Errorf("README.md:%d: `%s` prints\n%s\nbut the README shows\n%s", b.line+i+1, cmd, got, out)
				}
			}
			i = j - 1
		}
	}
	if pipelines == 0 || transcripts < 2 {
		t.Errorf("found %d pipelines and %d build transcripts in the README: did its blocks change shape?", pipelines, transcripts)
	}
}
