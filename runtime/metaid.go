package runtime

// Most routes set one metadata key, meta["mqb.id"] (the id step), and
// read it back only through programs: the dedup key, the sink's bound
// parameter. A map of its own per record for that one key was a tenth of
// the CPU of a file → SQLite route (its allocation, clearing and
// scanning), so an id set on a record with no metadata yet waits in the
// record (Record.id) instead. Everything that reads metadata goes through
// metaGet or metaView, or sees Meta only after flushMeta put the id in
// it: setting any other key, a step that rewrites metadata, the DLQ, and
// every sink not on the allow-list of those that read metadata only
// through programs (MetaByPrograms), before its Write.

// MetaByPrograms is a sink that reads a record's metadata only through
// the programs it was built with (Evaluator.Run), never Record.Meta
// itself: the engine then need not build each record's Meta map for it.
// A sink that is not one gets records whose Meta holds every key.
type MetaByPrograms interface {
	ReadsMetaByPrograms() bool
}

// metaGet is r.Meta[k], the pending id included.
func (r *Record) metaGet(k string) (string, bool) {
	if r.hasID && k == metaID {
		return r.id, true
	}
	s, ok := r.Meta[k]
	return s, ok
}

// metaView is r's metadata as a map, the pending id included, without
// changing r (a new map when an id is pending).
func (r *Record) metaView() map[string]string {
	if !r.hasID {
		return r.Meta
	}
	return map[string]string{metaID: r.id}
}

// flushMeta moves a pending id into r.Meta.
func (r *Record) flushMeta() {
	if r.hasID {
		r.Meta = map[string]string{metaID: r.id}
		r.id, r.hasID, r.idValue = "", false, nil
	}
}

// setIDValue is setMeta(metaID, s) for the id step, whose expression
// gave s as v, a string already boxed (a decoded field): when the id
// waits in r, v is kept to hand to the programs that read it back (the
// sink's bound key, the dedup key), sparing a boxing per read.
func (r *Record) setIDValue(s string, v any) {
	r.setMeta(metaID, s)
	if r.hasID {
		if vs, ok := v.(string); ok && vs == s {
			r.idValue = v
		}
	}
}

// metaValue is metaGet(k) as a value: the id's boxed value when kept.
func (r *Record) metaValue(k string) (any, bool) {
	if r.hasID && k == metaID && r.idValue != nil {
		return r.idValue, true
	}
	s, ok := r.metaGet(k)
	return s, ok
}

// flushMetaFor gives each of recs its whole Meta map, unless sink reads
// metadata only through programs.
func flushMetaFor(sink any, recs []*Record) {
	if mp, ok := sink.(MetaByPrograms); ok && mp.ReadsMetaByPrograms() {
		return
	}
	for _, r := range recs {
		r.flushMeta()
	}
}
