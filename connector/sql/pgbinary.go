package sql

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strconv"
	"sync"
)

// COPY's binary format, for the types whose binary form the sink can
// write knowing it means what the text form would: the server reads each
// value with the type's receive function instead of parsing text, and
// COPY has no escapes and no line to split.
//
// A value is written in binary only when the text the row-by-row insert
// would send is one the server would read as the same value: an integer
// column takes an int64, or text of plain decimal digits; a text column
// takes the same bytes as text; json and jsonb take the same JSON text
// (the server still parses it). Anything else (a float into an integer
// column, a string of a float, a value out of range) is not encoded
// (appendBinaryField says so) and the caller writes the batch in text
// instead, so the server's own parser and its errors decide as before.

// PostgreSQL type OIDs the binary encoder knows.
const (
	oidBool    = 16
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidJSON    = 114
	oidFloat8  = 701
	oidUnknown = 705
	oidBPChar  = 1042
	oidVarchar = 1043
	oidJSONB   = 3802
)

// binaryCopyHeader starts a binary COPY stream: the signature, no flags,
// no header extension.
var binaryCopyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// binaryCopyTrailer ends it: a tuple of -1 fields.
var binaryCopyTrailer = []byte{0xff, 0xff}

// binaryFit reports whether every type in oids has a binary form
// appendBinaryField writes.
func binaryFit(oids []uint32) bool {
	for _, oid := range oids {
		switch oid {
		case oidBool, oidInt8, oidInt2, oidInt4, oidText, oidJSON, oidFloat8, oidBPChar, oidVarchar, oidJSONB:
		default:
			return false
		}
	}
	return len(oids) > 0
}

// appendBinaryField appends v as one field of a binary COPY tuple for a
// column of type oid: its length, then its bytes (length -1 for NULL).
// ok is false when v has no binary form the server would read as it
// reads v's text form; dst is then unusable.
func appendBinaryField(dst []byte, oid uint32, v any) (_ []byte, ok bool) {
	if v == nil {
		return binary.BigEndian.AppendUint32(dst, math.MaxUint32), true
	}
	switch oid {
	case oidText, oidBPChar, oidVarchar, oidJSON, oidJSONB:
		at := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		if oid == oidJSONB {
			dst = append(dst, 1) // jsonb's binary version
		}
		dst, _ = appendPGValue(dst, v)
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
		return dst, true
	case oidInt2, oidInt4, oidInt8:
		n, ok := binaryInt(v)
		if !ok {
			return dst, false
		}
		switch oid {
		case oidInt2:
			if n < math.MinInt16 || n > math.MaxInt16 {
				return dst, false
			}
			dst = binary.BigEndian.AppendUint32(dst, 2)
			return binary.BigEndian.AppendUint16(dst, uint16(n)), true
		case oidInt4:
			if n < math.MinInt32 || n > math.MaxInt32 {
				return dst, false
			}
			dst = binary.BigEndian.AppendUint32(dst, 4)
			return binary.BigEndian.AppendUint32(dst, uint32(n)), true
		}
		dst = binary.BigEndian.AppendUint32(dst, 8)
		return binary.BigEndian.AppendUint64(dst, uint64(n)), true
	case oidFloat8:
		// The shortest text of a float64 reads back as the same float64;
		// an int64's text rounds as the conversion does (to nearest).
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		default:
			return dst, false
		}
		dst = binary.BigEndian.AppendUint32(dst, 8)
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(f)), true
	case oidBool:
		b, ok := binaryBool(v)
		if !ok {
			return dst, false
		}
		dst = binary.BigEndian.AppendUint32(dst, 1)
		if b {
			return append(dst, 1), true
		}
		return append(dst, 0), true
	}
	return dst, false
}

// binaryInt is v as an integer column reads its text form, when that is
// certain: an int64, or text of an optional minus sign and decimal
// digits (no sign plus, no spaces, nothing the server might read
// differently).
func binaryInt(v any) (int64, bool) {
	var s []byte
	switch x := v.(type) {
	case int64:
		return x, true
	case string:
		s = []byte(x)
	case []byte:
		s = x
	default:
		return 0, false
	}
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 19 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(s), 10, 64)
	return n, err == nil
}

// errBinaryMisfit stops a binary COPY at a value appendBinaryField cannot
// write: the batch goes again in text.
var errBinaryMisfit = errors.New("a value has no binary form: the batch goes in text")

// errCopyStopped ends a read after the COPY it fed returned.
var errCopyStopped = errors.New("copy stopped")

// binaryCopyReader renders a binary COPY stream as it is read, tuple by
// tuple through encode, so the server reads the first tuples while the
// sink encodes the next. encode appends tuple i, appends nothing for a
// record it refused, or says it cannot (errBinaryMisfit: misfit is set).
//
// pgconn reads it on a goroutine of its own; stop, called once the COPY
// returned, makes sure nothing reads on (nor touches a record) after it.
type binaryCopyReader struct {
	encode func(dst []byte, i int) ([]byte, bool)
	n      int

	mu              sync.Mutex
	next            int
	buf             []byte
	off             int
	started, ended  bool
	misfit, stopped bool
}

func (r *binaryCopyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return 0, errCopyStopped
	}
	if r.misfit {
		return 0, errBinaryMisfit
	}
	r.buf, r.off = append(r.buf[:0], r.buf[r.off:]...), 0
	if !r.started {
		r.buf, r.started = append(r.buf, binaryCopyHeader...), true
	}
	for len(r.buf) < len(p) && r.next < r.n {
		var ok bool
		if r.buf, ok = r.encode(r.buf, r.next); !ok {
			r.misfit = true
			return 0, errBinaryMisfit
		}
		r.next++
	}
	if r.next == r.n && !r.ended {
		r.buf, r.ended = append(r.buf, binaryCopyTrailer...), true
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.off = n
	return n, nil
}

// stop ends the reading; it reports whether the stream stopped at a
// value it could not encode.
func (r *binaryCopyReader) stop() (misfit bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	return r.misfit
}

// appendBinaryTuple appends one tuple of vals for columns of types oids.
func appendBinaryTuple(dst []byte, oids []uint32, vals []any) ([]byte, bool) {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(vals)))
	for j, v := range vals {
		var ok bool
		if dst, ok = appendBinaryField(dst, oids[j], v); !ok {
			return dst, false
		}
	}
	return dst, true
}

// binaryBool is v as a boolean column reads its text form, when that is
// certain: a bool, or the text true or false (as a bool's text form is).
func binaryBool(v any) (b, ok bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		return x == "true", x == "true" || x == "false"
	case []byte:
		return string(x) == "true", string(x) == "true" || string(x) == "false"
	}
	return false, false
}
