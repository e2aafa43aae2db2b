package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

func init() {
	register(&command{
		Name:  "tap",
		Usage: "mqbc tap [--addr ADDR] [--limit N] ROUTE[.POINT]",
		Summary: "watch the records of a running route (mqbc run --metrics-addr ADDR) as JSON lines: as read (source), after a step (filter, map, map#2…) " +
			"or as the sink gets them (sink, the default)",
		Run: runTap,
	})
}

func runTap(args []string, stdout, stderr io.Writer) int {
	c := commands["tap"]
	fs := newFlags(c, stderr)
	addr := fs.String("addr", "127.0.0.1:9464", "the --metrics-addr of the running mqbc run")
	limit := fs.Int("limit", 0, "stop after N records (0: until interrupted)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) != 1 || *limit < 0 {
		fs.Usage()
		return exitUsage
	}
	route, at, _ := strings.Cut(pos[0], ".")
	q := url.Values{"route": {route}}
	if at != "" {
		q.Set("at", at)
	}
	if *limit > 0 {
		q.Set("limit", fmt.Sprint(*limit))
	}
	resp, err := http.Get("http://" + *addr + "/tap?" + q.Encode())
	if err != nil {
		fmt.Fprintf(stderr, "mqbc tap: %v (is mqbc run serving --metrics-addr %s?)\n", err, *addr)
		return exitError
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		fmt.Fprintf(stderr, "mqbc tap: %s\n", strings.TrimSpace(string(b)))
		return exitError
	}
	r := bufio.NewReader(resp.Body)
	head, err := r.ReadBytes('\n')
	if err != nil {
		fmt.Fprintf(stderr, "mqbc tap: %v\n", err)
		return exitError
	}
	var h struct {
		Tapping string   `json:"tapping"`
		At      string   `json:"at"`
		Points  []string `json:"points"`
	}
	if json.Unmarshal(head, &h) == nil {
		fmt.Fprintf(stderr, "mqbc tap: watching route %s at %s (its points: %s)\n", h.Tapping, h.At, strings.Join(h.Points, ", "))
	}
	if _, err := io.Copy(stdout, r); err != nil {
		fmt.Fprintf(stderr, "mqbc tap: %v\n", err)
		return exitError
	}
	return exitOK
}
