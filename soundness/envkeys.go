package main

import (
	"fmt"
	"math/rand/v2"
)

// Keys built from env("…"): an id step, a dedup key and a sql conflict
// key that read the process environment. The compiler calls such a key
// stable within one process (W021: a restart with another value writes
// every replayed record again under a new key); the harness runs every
// process of a case with one environment, so the verdict must hold. Two
// names are read: HOME, set in the harness's environment, and
// SOUNDNESS_TENANT, which nothing sets (env() is then "", on every
// start alike).
//
// The draws come from a stream of their own (Case.envx), so a seed that
// draws none generates what it did before; a seed that draws one counts
// as drawing a rule shape (-rules checks it).

// envKeys turns the keys of this file on.
var envKeys = true

// pickEnvKeys gives c the stream of this file's keys.
func pickEnvKeys(c *Case) {
	if !envKeys || c.Seed <= 10 {
		return
	}
	c.envx = rand.New(rand.NewPCG(c.Seed, 0xe4b))
}

// envName draws the variable an env key reads.
func (g *routeGen) envName() string {
	return []string{"HOME", "SOUNDNESS_TENANT"}[g.c.envx.IntN(2)]
}

// envKey is, for some keys, one that reads env() besides payload.id (an
// expression, for an id or a dedup step); "" when not drawn.
func (g *routeGen) envKey(rate int) string {
	if g.c.envx == nil || g.c.envx.IntN(100) >= rate {
		return ""
	}
	g.c.ruleDrawn = true
	switch g.c.envx.IntN(3) {
	case 0:
		return fmt.Sprintf(`env(%q) + "/" + string(payload.id)`, g.envName())
	case 1:
		return fmt.Sprintf(`string(payload.id) + "@" + env(%q)`, g.envName())
	default:
		// env() decides which stable value is the key.
		return fmt.Sprintf(`env(%q) == "" ? "none/" + string(payload.id) : "set/" + string(payload.id)`, g.envName())
	}
}

// envSQLKey is, for some sql sinks, a conflict key that reads env()
// besides payload.id, as insert_query writes it; "" when not drawn.
func (g *routeGen) envSQLKey() string {
	if e := g.envKey(6); e != "" {
		return "${" + e + "}"
	}
	return ""
}
