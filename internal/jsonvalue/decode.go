// Package jsonvalue decodes one JSON document into the values mqb
// expressions see — map[string]any, []any, string, bool, nil, and numbers
// that keep every digit: int64 for an integer that fits, uint64 for one
// above it that fits, float64 for a number float64 holds exactly as
// written (its shortest form has the literal's digits), and json.Number
// (the literal itself) for anything else — so two ids that differ in
// their last digit never decode to one value. It also validates documents
// without building them.
//
// encoding/json would turn every number into float64 (an id above 2^53
// silently changes) and costs several times more per record; a payload is
// decoded once per record on the hot path, so this is a small dedicated
// parser. Object keys are interned per Decoder, since every line of a file
// repeats the same keys.
package jsonvalue

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// maxDepth bounds nesting so a hostile line cannot exhaust the stack.
const maxDepth = 512

// SyntaxError describes invalid JSON.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	// Built once for each malformed record a DLQ gets: without fmt.
	return "invalid JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Decoder decodes documents; it is not safe for concurrent use.
type Decoder struct {
	keys  map[string]string
	buf   []byte // unescape scratch
	data  []byte
	pos   int
	build bool
	depth int
	// fields, when set, limits which members of the top-level object are
	// built (DecodeFields).
	fields map[string]bool
	// slotKeys is the slot index DecodeSlots was last given, as a list.
	slotKeys slotKeys
	// cells, when set, boxes the values built, and strings alias data
	// (DecodeSlotsIn).
	cells *Cells
	// quiet: errors are errQuiet or errQuietStricter, with no message
	// (Check).
	quiet bool
}

// NewDecoder returns a Decoder with an empty key cache.
func NewDecoder() *Decoder { return &Decoder{keys: make(map[string]string, 64)} }

// Decode parses data, which must hold exactly one JSON value (surrounding
// whitespace allowed).
func (d *Decoder) Decode(data []byte) (any, error) {
	d.data, d.pos, d.build, d.depth = data, 0, true, 0
	v, err := d.document()
	d.data = nil
	return v, err
}

// DecodeFields is Decode for a top-level object of which only the keys in
// fields are needed: the whole document is validated, but other members
// are skipped without building their values. A document that is not an
// object decodes in full.
func (d *Decoder) DecodeFields(data []byte, fields map[string]bool) (any, error) {
	d.data, d.pos, d.build, d.depth, d.fields = data, 0, true, 0, fields
	v, err := d.document()
	d.data, d.fields = nil, nil
	return v, err
}

// Valid reports whether data holds exactly one JSON value, without
// allocating the decoded value.
func (d *Decoder) Valid(data []byte) error {
	d.data, d.pos, d.build, d.depth = data, 0, false, 0
	_, err := d.document()
	d.data = nil
	return err
}

func (d *Decoder) document() (any, error) {
	d.skipSpace()
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, d.unexpected(d.data[d.pos], " after the value")
	}
	return v, nil
}

// errorf is the error at d.pos. A route's malformed records each get
// one, so a message without arguments is not passed through fmt.
func (d *Decoder) errorf(format string, args ...any) error {
	if d.quiet {
		return errQuiet
	}
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &SyntaxError{Offset: d.pos, Msg: msg}
}

// unexpected is errorf("unexpected %q"+rest, c), the commonest error,
// without fmt.
func (d *Decoder) unexpected(c byte, rest string) error {
	if d.quiet {
		return errQuiet
	}
	return &SyntaxError{Offset: d.pos, Msg: unexpectedMsg(c, rest)}
}

func unexpectedMsg(c byte, rest string) string {
	return "unexpected " + strconv.QuoteRune(rune(c)) + rest
}

// stricter is errorf for a document this package refuses though JSON
// does not forbid it: nesting deeper than maxDepth, a lone surrogate
// escape, bytes that are not UTF-8 in a string.
func (d *Decoder) stricter(format string, args ...any) error {
	if d.quiet {
		return errQuietStricter
	}
	return d.errorf(format, args...)
}

// What a quiet Decoder (Check) returns instead of building an error.
var (
	errQuiet         = &SyntaxError{Msg: "invalid JSON"}
	errQuietStricter = &SyntaxError{Msg: "refused by a rule stricter than JSON's"}
)

// Check is Valid without the error: whether data holds exactly one JSON
// value, and when it does not, whether it was refused by one of this
// package's rules stricter than JSON's (see stricter; the rest of it is
// then unread), so that encoding/json may still call it JSON. A caller
// asking of many documents, most of them not JSON (a dead-letter
// queue's), is spared building a message for each.
func (d *Decoder) Check(data []byte) (valid, stricter bool) {
	d.quiet = true
	err := d.Valid(data)
	d.quiet = false
	return err == nil, err == errQuietStricter
}

func (d *Decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *Decoder) value() (any, error) {
	if d.pos >= len(d.data) {
		return nil, d.errorf("unexpected end of input")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		if d.cells != nil && d.build {
			return d.cellStr()
		}
		s, err := d.str(false)
		if err != nil || !d.build {
			return nil, err
		}
		return s, nil
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	default:
		return nil, d.unexpected(c, "")
	}
}

func (d *Decoder) literal(word string) error {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return d.errorf("invalid literal, want %s", word)
	}
	d.pos += len(word)
	return nil
}

func (d *Decoder) object() (any, error) {
	d.pos++ // '{'
	if d.depth++; d.depth > maxDepth {
		return nil, d.stricter("nesting deeper than %d", maxDepth)
	}
	defer func() { d.depth-- }()
	var m map[string]any
	if d.build {
		m = make(map[string]any, 8)
	}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return m, nil
	}
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.errorf("want an object key")
		}
		k, err := d.str(true)
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.errorf("want ':' after an object key")
		}
		d.pos++
		d.skipSpace()
		build := d.build
		if build && d.depth == 1 && d.fields != nil && !d.fields[k] {
			d.build = false // validate, do not build
		}
		v, err := d.value()
		skipped := build && !d.build
		d.build = build
		if err != nil {
			return nil, err
		}
		if d.build && !skipped {
			m[k] = v
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.errorf("unterminated object")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return m, nil
		default:
			return nil, d.errorf("want ',' or '}' in an object")
		}
	}
}

func (d *Decoder) array() (any, error) {
	d.pos++ // '['
	if d.depth++; d.depth > maxDepth {
		return nil, d.stricter("nesting deeper than %d", maxDepth)
	}
	defer func() { d.depth-- }()
	var a []any
	if d.build {
		a = make([]any, 0, 4)
	}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return a, nil
	}
	for {
		d.skipSpace()
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		if d.build {
			a = append(a, v)
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, d.errorf("unterminated array")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return a, nil
		default:
			return nil, d.errorf("want ',' or ']' in an array")
		}
	}
}

// str parses a string at d.pos ('"'); when key, the result is interned.
func (d *Decoder) str(key bool) (string, error) {
	raw, err := d.strBytes()
	if err != nil || !d.build {
		return "", err
	}
	if key {
		return d.intern(raw), nil
	}
	return string(raw), nil
}

// cellStr is a string value at d.pos boxed in d.cells: without escapes,
// its bytes are the document's own; with them, a copy of the unescaped
// text.
func (d *Decoder) cellStr() (any, error) {
	start := d.pos + 1
	raw, err := d.strBytes()
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return d.cells.str(""), nil
	}
	if unsafe.SliceData(raw) == &d.data[start] && len(raw) == d.pos-1-start {
		return d.cells.str(unsafe.String(&raw[0], len(raw))), nil
	}
	return d.cells.str(string(raw)), nil // unescaped into d.buf, reused
}

// strBytes parses a string at d.pos ('"') and returns its text: a slice
// of the document, or of the unescape scratch when it holds escapes, so
// valid only until the next string is parsed. It allocates nothing.
func (d *Decoder) strBytes() ([]byte, error) {
	start := d.pos + 1
	i := start
	var high byte // OR of every byte: a non-ASCII one needs a UTF-8 check
	for i < len(d.data) {
		i = plainASCII(d.data, i)
		if i >= len(d.data) {
			break
		}
		c := d.data[i]
		high |= c
		if c == '"' {
			raw := d.data[start:i]
			if high >= utf8.RuneSelf && !utf8.Valid(raw) {
				d.pos = start + invalidUTF8At(raw)
				return nil, d.stricter("invalid UTF-8 in string")
			}
			d.pos = i + 1
			return raw, nil
		}
		if c == '\\' {
			return d.strEscaped(start)
		}
		if c < 0x20 {
			d.pos = i
			return nil, d.errorf("control character in string")
		}
		i++
	}
	d.pos = i
	return nil, d.errorf("unterminated string")
}

// invalidUTF8At returns the offset of the first byte of b that does not
// start a valid UTF-8 sequence. JSON text is UTF-8 (RFC 8259): a string
// holding anything else is refused rather than passed on to a sink whose
// text columns would store or reject it unpredictably.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func (d *Decoder) intern(raw []byte) string {
	if s, ok := d.keys[string(raw)]; ok {
		return s
	}
	s := string(raw)
	if len(d.keys) < 4096 {
		d.keys[s] = s
	}
	return s
}

func (d *Decoder) strEscaped(start int) ([]byte, error) {
	buf := d.buf[:0]
	i := start
	for i < len(d.data) {
		c := d.data[i]
		switch {
		case c == '"':
			if raw := d.data[start:i]; !utf8.Valid(raw) {
				d.pos = start + invalidUTF8At(raw)
				return nil, d.stricter("invalid UTF-8 in string")
			}
			d.pos = i + 1
			d.buf = buf
			return buf, nil
		case c < 0x20:
			d.pos = i
			return nil, d.errorf("control character in string")
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		if i+1 >= len(d.data) {
			break
		}
		e := d.data[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(d.data, i)
			if !ok {
				d.pos = i
				return nil, d.errorf("invalid \\u escape")
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(-1), false
				if i+6 <= len(d.data) && d.data[i] == '\\' && d.data[i+1] == 'u' {
					r2, ok2 = hex4(d.data, i+2)
				}
				dec := utf16.DecodeRune(r, r2)
				if !ok2 || dec == utf8.RuneError {
					// A surrogate not in a pair has no UTF-8 form:
					// encoding/json writes U+FFFD for it, so two
					// strings that differ there (two ids) would
					// decode to one value. I-JSON (RFC 7493) refuses
					// it, and so does this decoder.
					d.pos = i - 6
					return nil, d.stricter("lone UTF-16 surrogate \\u%04x (a surrogate escape must be followed by its pair; alone it has no UTF-8 form)", r)
				}
				r = dec
				i += 6
			}
			buf = utf8.AppendRune(buf, r)
		default:
			d.pos = i - 1
			return nil, d.errorf("invalid escape \\%c", e)
		}
	}
	d.pos = i
	return nil, d.errorf("unterminated string")
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (d *Decoder) number() (any, error) {
	start := d.pos
	i := d.pos
	if d.data[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d.data) && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
			n++
		}
		return n
	}
	intStart := i
	if n := digits(); n == 0 || (n > 1 && d.data[intStart] == '0') {
		d.pos = i
		return nil, d.errorf("invalid number")
	}
	isFloat := false
	if i < len(d.data) && d.data[i] == '.' {
		i++
		isFloat = true
		if digits() == 0 {
			d.pos = i
			return nil, d.errorf("invalid number")
		}
	}
	if i < len(d.data) && (d.data[i] == 'e' || d.data[i] == 'E') {
		i++
		isFloat = true
		if i < len(d.data) && (d.data[i] == '+' || d.data[i] == '-') {
			i++
		}
		if digits() == 0 {
			d.pos = i
			return nil, d.errorf("invalid number")
		}
	}
	d.pos = i
	if !d.build {
		return nil, nil
	}
	lit := d.data[start:i]
	if !isFloat {
		if n, ok := parseInt(lit); ok {
			if d.cells != nil {
				return d.cells.int(n), nil
			}
			return n, nil
		}
		if lit[0] != '-' {
			if u, err := strconv.ParseUint(string(lit), 10, 64); err == nil {
				return u, nil
			}
		}
		return json.Number(lit), nil
	}
	// lit as a string without a copy: ParseFloat keeps no reference to
	// it, and its error, which might, is dropped.
	f, err := strconv.ParseFloat(unsafe.String(&lit[0], len(lit)), 64)
	if err != nil || !floatExact(lit, f) {
		// Out of float64's range, or more digits than it holds: the
		// literal is the value.
		return json.Number(lit), nil
	}
	if d.cells != nil {
		return d.cells.float(f), nil
	}
	return f, nil
}

// floatExact reports whether f, printed in its shortest form, has the
// digits of the literal it was parsed from: then nothing was lost. Up to
// 15 significant digits always round-trip (DBL_DIG) for a normal float;
// longer literals, such as the shortest form another program printed
// (0.30000000000000004), and every subnormal one (below 2^-1022 a float
// holds fewer digits: 4.9e-324 parses to the float printed 5e-324) are
// compared digit by digit. A literal that parses to zero is exact only
// when it is zero.
func floatExact(lit []byte, f float64) bool {
	subnormal := f != 0 && math.Abs(f) < 0x1p-1022
	if f == 0 {
		// 0, or a literal too small for any float (1e-400): the
		// literal is zero only if it has no digit but 0.
		for _, c := range lit {
			if c == 'e' || c == 'E' {
				break
			}
			if c >= '1' && c <= '9' {
				return false
			}
		}
		return true
	}
	if len(lit) <= 15 && !subnormal { // no more digits than bytes
		return true
	}
	digits, exp := decimalDigits(lit)
	if len(digits) <= 15 && !subnormal {
		return true
	}
	short := strconv.AppendFloat(nil, f, 'e', -1, 64)
	d2, e2 := decimalDigits(short)
	return exp == e2 && string(digits) == string(d2)
}

// decimalDigits returns a number literal's significant digits (no leading
// or trailing zeros) and the decimal exponent of the first of them, so
// that 1.50, 15e-1 and 0.0150e2 all give ("15", 0).
func decimalDigits(lit []byte) (digits []byte, exp int) {
	mant, e := lit, 0
	if k := indexAny(lit, 'e', 'E'); k >= 0 {
		mant = lit[:k]
		n, err := strconv.Atoi(string(lit[k+1:]))
		if err != nil {
			n = 1 << 30 // absurd exponent: compares unequal
		}
		e = n
	}
	if len(mant) > 0 && (mant[0] == '-' || mant[0] == '+') {
		mant = mant[1:]
	}
	point := len(mant) // digits before the decimal point
	for i, c := range mant {
		if c == '.' {
			point = i
			continue
		}
		digits = append(digits, c)
	}
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	digits = digits[lead:]
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	return digits, point - lead - 1 + e
}

func indexAny(b []byte, c1, c2 byte) int {
	for i, c := range b {
		if c == c1 || c == c2 {
			return i
		}
	}
	return -1
}

// parseInt parses a validated integer literal; ok is false on overflow.
func parseInt(b []byte) (int64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 { // 19 digits never wrap a uint64
		return 0, false
	}
	return int64(u), true
}

// Bytes of a word, each set to the byte named (swar*), or to its low or
// high bit (swarLow, swarHigh).
const (
	swarLow   = 0x0101010101010101
	swarHigh  = 0x8080808080808080
	swarQuote = '"' * swarLow
	swarBack  = '\\' * swarLow
	swarSpace = ' ' * swarLow
)

// plainASCII returns the index of the first byte at or after i in data
// that a string's scan must look at (a quote, a backslash, a control
// byte or a non-ASCII byte), looking at eight bytes at a time; it returns
// i itself when fewer than eight are left, and may stop short of the end
// in the last eight, leaving those to the caller's byte loop. A word's
// byte that equals the one looked for turns zero in the xor, and a zero
// or a byte below 0x20 borrows from its high bit in the subtraction;
// borrows only run upward, so the lowest byte flagged is exact even when
// one above it is a false positive.
func plainASCII(data []byte, i int) int {
	for i+8 <= len(data) {
		v := binary.LittleEndian.Uint64(data[i:])
		q, b := v^swarQuote, v^swarBack
		special := ((q - swarLow) &^ q) | ((b - swarLow) &^ b) | ((v - swarSpace) &^ v) | v
		if special &= swarHigh; special != 0 {
			return i + bits.TrailingZeros64(special)/8
		}
		i += 8
	}
	return i
}
