package main

import "fmt"

// The shapes below were added after the compiler learnt to elide a dedup
// the sink already does and map learnt paths, deletes, payload
// replacement and meta keys. Their choices come from the case's ext
// stream, so a seed that draws none of them generates what it did before.

// elidable is the tail of a route whose dedup the compiler may leave out:
// the route's last step is a dedup on a key, and its sink is a keyed
// SQLite table whose ON CONFLICT (id) DO NOTHING binds id to that key.
type elidable struct {
	dedup    string // the dedup step, as written
	sqlKey   string // the insert's value for the id column
	volatile bool   // the key is per-delivery
}

// elidableTail draws, for some routes, the shape the dedup elision looks
// for. Concurrent routes and routes with a handler are drawn too (at a
// lower rate): the compiler must keep their dedup, and the harness then
// checks the kept one.
func (g *routeGen) elidableTail() *elidable {
	rate := 35
	if g.concurrent || g.handled {
		rate = 8
	}
	if g.c.ext.IntN(100) >= rate {
		return nil
	}
	type opt struct {
		key, sqlKey string
		volatile    bool
	}
	opts := []opt{
		{`payload.id`, `${payload.id}`, g.volatile["id"]},
		{`payload.id`, `${payload.id}`, g.volatile["id"]},
		// A key the sink binds differently: not the same key, never elided.
		{`payload.id`, `lower(${payload.id})`, g.volatile["id"]},
		{`message_id`, `${message_id}`, true},
	}
	if g.idSet {
		opts = append(opts, opt{`meta["mqb.id"]`, `${meta["mqb.id"]}`, g.idVolatile}, opt{`meta["mqb.id"]`, `${meta["mqb.id"]}`, g.idVolatile})
	}
	o := opts[g.c.ext.IntN(len(opts))]
	extra := ""
	switch g.c.ext.IntN(10) {
	case 0:
		extra = ", keep = true"
	case 1:
		extra = fmt.Sprintf(", store = %q", "pebble://state/dedup_"+g.name)
	}
	return &elidable{
		dedup:    fmt.Sprintf("dedup { key = %s, ttl = 1h%s }\n", o.key, extra),
		sqlKey:   o.sqlKey,
		volatile: o.volatile,
	}
}

// mapPathStep draws, for some map steps, one of the forms map gained with
// paths: a nested write, a delete, the whole payload replaced, a meta
// key; stable or per-delivery. It returns "" to leave the older forms.
func (g *routeGen) mapPathStep() string {
	if g.c.ext.IntN(100) >= 40 {
		return ""
	}
	switch g.c.ext.IntN(8) {
	case 0:
		return "map {\npayload.extra.tag = payload.tag\npayload.extra.n = payload.qty\n}\n"
	case 1:
		// A nested per-delivery value beside the fields the sql sinks
		// read; a file sink writes the whole payload, so extra is
		// compared as "*" (seed 2867 -rules: positional parts, two clean
		// runs apart by extra.at, were reported timing-dependent).
		g.volatile["extra"] = true
		return "map { payload.extra.at = string(now().UnixNano()) }\n"
	case 2:
		return "map {\npayload.tmp = payload.region\ndel payload.body\n}\n"
	case 3:
		// The key rewritten through a path, stably.
		return "map { payload.id = string(payload.id) + \"-p\" }\n"
	case 4:
		// The key rewritten through a path with a per-delivery value.
		g.volatile["id"] = true
		return "map { payload.id = message_id }\n"
	case 5:
		// The whole payload replaced by the fields the sinks read.
		g.ownID = false
		return "map { payload = {\"id\": payload.id, \"qty\": payload.qty, \"region\": payload.region, \"tag\": payload.tag, \"body\": payload.body, \"big\": payload.big} }\n"
	case 6:
		// Replaced, with a per-delivery quantity.
		g.volatile["qty"] = true
		g.ownID = false
		return "map { payload = {\"id\": payload.id, \"qty\": now().Nanosecond(), \"region\": payload.region, \"tag\": payload.tag, \"body\": payload.body, \"big\": payload.big} }\n"
	default:
		// A meta key, read back by the next map (a map reads the record
		// as it entered the block).
		return "map { meta[\"origin\"] = payload.region }\nmap { payload.origin = meta[\"origin\"] }\n"
	}
}
