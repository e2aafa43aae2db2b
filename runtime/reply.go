package runtime

// Reply is a route's answer for one record it delivered: the record as it
// reached the end of the route, after every step, the handler and the
// sink (a request's call may have replaced its payload with the call's
// response).
type Reply struct {
	// Partition and Seq are the position the source read the record at.
	Partition int32
	Seq       uint64
	// Kid and Kids: the record is element Kid of the Kids records an
	// unnest made of the one read at Seq (Kids 0: the record itself).
	Kid, Kids uint32
	// Payload is the record's final payload, encoded.
	Payload []byte
	// Meta is the record's final metadata (nil: none), shared with the
	// record: a Replier copies what it keeps before Reply returns.
	Meta map[string]string
}

// Replier is a source that answers whoever sent it a record with the
// route's reply (an http_server with request_reply). The engine hands it
// the replies of a group's delivered records once the sink and the DLQ
// wrote the group, before any of its records is acked: a source sends a
// reply only from Commit, once the route committed past the record, so
// no reply goes out for a record the route did not deliver. A record
// filtered, found a repeat or dead-lettered has no reply; one the route
// failed on is never committed.
type Replier interface {
	Reply(replies []Reply)
}

// reply hands the source the replies of the group's delivered records,
// when it takes replies. deliver calls it after the sink and the DLQ wrote
// the group, when every record still live was delivered, and before it
// acks any of them.
func (rt *route) reply(group []*batch) {
	rp, ok := rt.src.(Replier)
	if !ok {
		return
	}
	var out []Reply
	for _, b := range group {
		for i := range b.recs {
			r := &b.recs[i]
			if r.state != stLive {
				continue
			}
			if err := encodePayload(r); err != nil {
				// Delivered, with a value the sink did not need encoded:
				// the record is answered as one without a reply.
				rt.log.Warn("no reply for a delivered record", "partition", r.Partition, "position", r.Seq, "err", err)
				continue
			}
			out = append(out, Reply{Partition: r.Partition, Seq: r.Seq, Kid: r.kid, Kids: r.kids, Payload: r.Payload, Meta: r.Meta})
		}
	}
	if len(out) > 0 {
		rp.Reply(out)
	}
}
