package kafka

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/mqb-dev/mqb/runtime"
)

// The sink encodes each request's records itself, as one Kafka record
// batch (message format v2, uncompressed, no producer id), and sends the
// bytes with kafka-go's RawProduce: kafka-go's own encoder writes a record
// a few bytes at a time through its page buffers, which cost more than
// building the records. Format v2 needs Produce v3 (Kafka 0.11), which
// the sink checks when it connects (kafkaProduceVersion).

// castagnoli is the CRC-32C table a record batch's checksum uses.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Offsets into a v2 record batch of the fields filled in once its records
// are written.
const (
	batchLengthAt     = 8  // int32: bytes after this field
	batchCRCAt        = 17 // uint32: CRC-32C of everything after it
	batchAttributesAt = 21 // where the checksummed part begins
	batchLastDeltaAt  = 23 // int32: offset delta of the last record
	batchFirstTimeAt  = 27 // int64: first record's timestamp (ms)
	batchMaxTimeAt    = 35 // int64: the largest timestamp
	batchCountAt      = 57 // int32: number of records
	batchHeaderSize   = 61
)

// appendRecordSet appends segs' records to buf as the record set of a
// Produce request's partition carries them (what kafka-go's RawProduce
// sends as given): its size, then one record batch.
func appendRecordSet(buf []byte, segs []laneSegment) []byte {
	start := len(buf)
	buf = appendRecordBatch(append(buf, 0, 0, 0, 0), segs)
	binary.BigEndian.PutUint32(buf[start:], uint32(len(buf)-start-4))
	return buf
}

// appendRecordBatch appends segs' records to buf as one record batch, in
// order, and returns it.
func appendRecordBatch(buf []byte, segs []laneSegment) []byte {
	start := len(buf)
	var head [batchHeaderSize]byte
	binary.BigEndian.PutUint32(head[12:], 0xffffffff) // partition leader epoch: none
	head[16] = 2                                      // magic: format v2
	// attributes 0: no compression, create time, not transactional
	binary.BigEndian.PutUint64(head[43:], 0xffffffffffffffff) // producer id: none
	binary.BigEndian.PutUint16(head[51:], 0xffff)             // producer epoch: none
	binary.BigEndian.PutUint32(head[53:], 0xffffffff)         // base sequence: none
	buf = append(buf, head[:]...)

	var first, maxTime int64
	n := 0
	for si := range segs {
		seg := &segs[si]
		t := seg.w.time.UnixMilli()
		if n == 0 {
			first, maxTime = t, t
		}
		maxTime = max(maxTime, t)
		for _, i := range seg.idx {
			buf = appendRecord(buf, &seg.w.msgs[i], t-first, int64(n))
			n++
		}
	}

	b := buf[start:]
	binary.BigEndian.PutUint32(b[batchLengthAt:], uint32(len(b)-batchLengthAt-4))
	binary.BigEndian.PutUint32(b[batchLastDeltaAt:], uint32(n-1))
	binary.BigEndian.PutUint64(b[batchFirstTimeAt:], uint64(first))
	binary.BigEndian.PutUint64(b[batchMaxTimeAt:], uint64(maxTime))
	binary.BigEndian.PutUint32(b[batchCountAt:], uint32(n))
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
	return buf
}

// appendRecord appends m as a record of a v2 batch: its length, then
// attributes, timestamp and offset deltas, key (null when m has none),
// value, and the headers, the message id's first; the numbers as zigzag
// varints.
func appendRecord(buf []byte, m *kafkaOut, timeDelta, offsetDelta int64) []byte {
	value := m.rec.Payload
	key, headers := m.enc[:m.keyEnd], m.enc[m.keyEnd:]
	length := 1 + varintSize(timeDelta) + varintSize(offsetDelta) + len(key) +
		varintSize(int64(len(value))) + len(value) +
		varintSize(int64(1+m.extra)) + kafkaIDHeaderSize + len(headers)
	buf = binary.AppendVarint(buf, int64(length))
	buf = append(buf, 0) // record attributes: unused
	buf = binary.AppendVarint(buf, timeDelta)
	buf = binary.AppendVarint(buf, offsetDelta)
	buf = append(buf, key...)
	buf = binary.AppendVarint(buf, int64(len(value)))
	buf = append(buf, value...)
	buf = binary.AppendVarint(buf, int64(1+m.extra))
	buf = binary.AppendVarint(buf, int64(len(runtime.HeaderMessageID)))
	buf = append(buf, runtime.HeaderMessageID...)
	buf = binary.AppendVarint(buf, 36)
	buf = appendUUIDText(buf, m.rec.MessageUUID())
	return append(buf, headers...)
}

// varintSize is the length of v as a zigzag varint.
func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
