// Package jsonscan walks JSON text without decoding it: it finds where
// values end, steps through an object's members and decodes the odd string,
// in one pass and with no allocation. kubeindex reads API-server responses
// and evaluates its indexes with it. It checks structure (strings closed,
// brackets balanced and matched, members separated by commas, keys followed
// by colons) but not the spelling of numbers and literals, which it never
// interprets; Dropped, for a value whose bytes are never kept, does not
// match the kinds of brackets either.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"unicode/utf8"
)

// ErrShort means the bytes end inside the value: read more and scan again.
var ErrShort = errors.New("JSON value is incomplete")

// ErrNotObject is OpenObject's answer for a value that is not an object.
var ErrNotObject = errors.New("not a JSON object")

// maxNesting bounds nesting, as encoding/json does.
const maxNesting = 10000

func SyntaxError(b []byte, i int, msg string) error {
	i = max(0, min(i, len(b)))
	return fmt.Errorf("invalid JSON at byte %d near %q: %s", i, b[i:min(len(b), i+16)], msg)
}

// Bytes the Scanner must look at: inside a string, the quote and the
// escape; outside, the quote and the brackets. Every other byte is passed
// over by a loop that does nothing else.
var (
	stopInString  = [256]bool{'"': true, '\\': true}
	stopStructure = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}
)

// inString returns the index of the first quote or backslash in b at or
// after i, or len(b). The loop is unrolled by hand: most strings in
// Kubernetes objects are short, where a word-at-a-time test or a call to
// bytes.IndexByte costs more than it saves.
func inString(b []byte, i int) int {
	for i+4 <= len(b) {
		if stopInString[b[i]] {
			return i
		}
		if stopInString[b[i+1]] {
			return i + 1
		}
		if stopInString[b[i+2]] {
			return i + 2
		}
		if stopInString[b[i+3]] {
			return i + 3
		}
		i += 4
	}
	for i < len(b) && !stopInString[b[i]] {
		i++
	}
	return i
}

// Value returns the length of the JSON value b starts with (no leading
// space), ErrShort when b ends before the value does, or a syntax error.
// A number or literal at the very end of b is reported as ErrShort: more
// digits could follow.
func Value(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, ErrShort
	}
	switch b[0] {
	case '"':
		return stringEnd(b)
	case '{', '[':
		var s Scanner
		return s.Composite(b)
	}
	for i, c := range b {
		switch c {
		case ',', '}', ']', ' ', '\n', '\t', '\r':
			if i == 0 {
				return 0, SyntaxError(b, 0, "expected a value")
			}
			return i, nil
		case '"', '{', '[', ':':
			return 0, SyntaxError(b, i, "unexpected character in a literal")
		}
	}
	return 0, ErrShort
}

// stringEnd returns the length of the string b starts with (b[0] == '"').
func stringEnd(b []byte) (int, error) {
	i := 1
	for {
		i = inString(b, i)
		if i >= len(b) {
			return 0, ErrShort
		}
		if b[i] == '"' {
			return i + 1, nil
		}
		i += 2 // the escape and the character it escapes
	}
}

// Scanner finds the end of an object or array. It can resume: given the
// same value again with more bytes after an ErrShort, it continues where
// it stopped, so a value arriving in many small reads is scanned once.
type Scanner struct {
	pos   int  // bytes of the value scanned so far
	inStr bool // pos is inside a string
	depth int
	// The open brackets: the first 64 levels here, deeper ones in deep.
	stack [64]byte
	deep  []byte
}

// Reset makes the next Composite start a new value.
func (s *Scanner) Reset() { s.pos = 0 }

// Composite returns the length of the object or array b starts with, or
// ErrShort (scanning then resumes at the same place in a longer b).
// Its state lives in locals while it runs and goes back into s only when
// b runs out. It reads b eight bytes at a time (words.go): which bytes of
// a word are inside strings comes from its quotes and backslashes without
// a branch per byte, and only the brackets outside strings are looked at
// one by one. The last few bytes, fewer than a word, are read one at a
// time; a string is passed over where its opening quote is found.
func (s *Scanner) Composite(b []byte) (int, error) {
	if s.pos == 0 {
		s.depth, s.inStr = 0, false
	}
	i, depth, inStr := s.pos, s.depth, s.inStr
	var escaped bool // the byte at i is escaped by the backslash before it
	for i+8 <= len(b) {
		w := wordAt(b, i)
		quotes, backslashes := bytesEqual(w, '"'), bytesEqual(w, '\\')
		if backslashes != 0 || escaped {
			quotes, escaped = unescaped(quotes, backslashes, escaped)
		}
		inside := prefixXor(quotes) // a quote's byte and what follows it, to the next
		if inStr {
			inside = ^inside
		}
		inStr = inside>>63 != 0
		lower := w | 0x2020202020202020 // '[' and ']' read as '{' and '}'
		opens, closes := bytesEqual(lower, '{')&^inside, bytesEqual(lower, '}')&^inside
		for brackets := opens | closes; brackets != 0; brackets &= brackets - 1 {
			bit := brackets & -brackets
			at := i + bits.TrailingZeros64(bit)/8
			c := b[at]
			if opens&bit != 0 {
				if !s.push(c, depth) {
					return 0, SyntaxError(b, at, "nested too deeply")
				}
				depth++
				continue
			}
			if depth == 0 || c != s.open(depth)+2 { // '{'+2 == '}', '['+2 == ']'
				return 0, SyntaxError(b, at, "mismatched bracket")
			}
			depth--
			if depth == 0 {
				s.pos, s.inStr, s.depth = 0, false, 0
				return at + 1, nil
			}
		}
		i += 8
	}
	if escaped { // read the backslash again below, with what it escapes
		i--
	}
	if inStr {
		var ok bool
		if i, ok = closeString(b, i); !ok {
			s.pos, s.inStr, s.depth = i, true, depth
			return 0, ErrShort
		}
	}
	for {
		for i < len(b) && !stopStructure[b[i]] {
			i++
		}
		if i >= len(b) {
			s.pos, s.inStr, s.depth = i, false, depth
			return 0, ErrShort
		}
		switch c := b[i]; c {
		case '"':
			var ok bool
			if i, ok = closeString(b, i+1); !ok {
				s.pos, s.inStr, s.depth = i, true, depth
				return 0, ErrShort
			}
			continue
		case '{', '[':
			if !s.push(c, depth) {
				return 0, SyntaxError(b, i, "nested too deeply")
			}
			depth++
		default: // '}', ']'
			if depth == 0 || c != s.open(depth)+2 {
				return 0, SyntaxError(b, i, "mismatched bracket")
			}
			depth--
			if depth == 0 {
				s.pos, s.inStr, s.depth = 0, false, 0
				return i + 1, nil
			}
		}
		i++
	}
}

// push records the bracket c opened at depth; false when that is too deep.
func (s *Scanner) push(c byte, depth int) bool {
	switch {
	case depth < len(s.stack):
		s.stack[depth] = c
	case depth == maxNesting:
		return false
	default:
		s.deep = append(s.deep[:depth-len(s.stack)], c)
	}
	return true
}

// open is the bracket that opened the innermost of depth (> 0) levels.
func (s *Scanner) open(depth int) byte {
	if depth <= len(s.stack) {
		return s.stack[depth-1]
	}
	return s.deep[depth-1-len(s.stack)]
}

// closeString passes over the rest of a string from b[i:] (inside it) and
// returns the index after its closing quote, true; or, when b ends first,
// where to resume (a backslash that ends b is read again), false.
func closeString(b []byte, i int) (int, bool) {
	for {
		i = inString(b, i)
		if i >= len(b) {
			return i, false
		}
		if b[i] == '"' {
			return i + 1, true
		}
		if i+1 >= len(b) {
			return i, false // resume at the backslash
		}
		i += 2
	}
}

func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// Object walks the members of a JSON object in b, one at a time:
// next positions it on a member's value, which the caller then passes over
// with skip, or walks itself and reports the end of with done. Any method
// returns ErrShort when b ends before the object does.
type Object struct {
	b       []byte
	i       int // the next byte to read
	members int
	// The current member: its raw key (quotes off, escapes kept), where the
	// key's quote is, and where its value starts.
	Key          []byte
	KeyAt, ValAt int
}

// OpenObject starts reading the object at b[at:] (after any space).
func OpenObject(b []byte, at int) (Object, error) {
	i := SkipSpace(b, at)
	if i >= len(b) {
		return Object{}, ErrShort
	}
	if b[i] != '{' {
		return Object{}, ErrNotObject
	}
	return Object{b: b, i: i + 1}, nil
}

// next moves to the next member: false at the closing brace, after which
// end() is just past it.
func (r *Object) Next() (bool, error) {
	b := r.b
	i := SkipSpace(b, r.i)
	if i >= len(b) {
		return false, ErrShort
	}
	if b[i] == '}' {
		r.i = i + 1
		return false, nil
	}
	if r.members > 0 {
		if b[i] != ',' {
			return false, SyntaxError(b, i, "expected ',' or '}'")
		}
		if i = SkipSpace(b, i+1); i >= len(b) {
			return false, ErrShort
		}
	}
	if b[i] != '"' {
		return false, SyntaxError(b, i, "expected a key")
	}
	n, err := stringEnd(b[i:])
	if err != nil {
		return false, err
	}
	r.Key, r.KeyAt = b[i+1:i+n-1], i
	if i = SkipSpace(b, i+n); i >= len(b) {
		return false, ErrShort
	}
	if b[i] != ':' {
		return false, SyntaxError(b, i, "expected ':'")
	}
	if i = SkipSpace(b, i+1); i >= len(b) {
		return false, ErrShort
	}
	r.ValAt = i
	r.members++
	return true, nil
}

// skip passes over the current member's value and returns where it ends.
func (r *Object) Skip() (int, error) {
	n, err := Value(r.b[r.ValAt:])
	if err != nil {
		return 0, err
	}
	r.i = r.ValAt + n
	return r.i, nil
}

// SkipDropped is Skip for a value the caller will not keep: an object or
// array is passed over by Dropped, which does not check that each closing
// bracket is of its opening one's kind.
func (r *Object) SkipDropped() (int, error) {
	v := r.b[r.ValAt:]
	if len(v) == 0 || v[0] != '{' && v[0] != '[' {
		return r.Skip()
	}
	n, err := Dropped(v)
	if err != nil {
		return 0, err
	}
	r.i = r.ValAt + n
	return r.i, nil
}

// done records that the caller read the current value up to valEnd.
func (r *Object) Done(valEnd int) { r.i = valEnd }

// end is where reading stopped: after the closing brace once next
// returned false.
func (r *Object) End() int { return r.i }

// String decodes the JSON string value s (with its quotes) as
// encoding/json does. Strings without escapes, nearly all in Kubernetes
// objects, are copied as they are, unless they hold invalid UTF-8, which
// encoding/json replaces.
func String(s []byte) (string, error) {
	if len(s) < 2 || s[0] != '"' {
		return "", fmt.Errorf("expected a string, got %.16q", s)
	}
	raw := s[1 : len(s)-1]
	if !decodesToItself(raw) {
		var out string
		err := json.Unmarshal(s, &out)
		return out, err
	}
	return string(raw), nil
}

// decodesToItself reports whether the raw string (quotes off) decodes to
// itself: no escape, and valid UTF-8.
func decodesToItself(raw []byte) bool {
	ascii := true
	for _, c := range raw {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	return ascii || utf8.Valid(raw)
}

// IsSpace reports whether c is JSON white space.
func IsSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// Member returns the value of the first member named key in the JSON
// object obj, or nil when obj is not an object or has no such member.
func Member(obj []byte, key string) []byte {
	r, err := OpenObject(obj, 0)
	if err != nil {
		return nil
	}
	for {
		more, err := r.Next()
		if err != nil || !more {
			return nil
		}
		if KeyIs(r.Key, key) {
			end, err := r.Skip()
			if err != nil {
				return nil
			}
			return obj[r.ValAt:end]
		}
		if _, err := r.Skip(); err != nil {
			return nil
		}
	}
}

// KeyIs reports whether the raw key (quotes off, escapes kept) spells key.
func KeyIs(raw []byte, key string) bool {
	if string(raw) == key {
		return true
	}
	if decodesToItself(raw) {
		return false
	}
	dec, err := String(append(append([]byte{'"'}, raw...), '"'))
	return err == nil && dec == key
}

// Elements calls fn with each element of the JSON array arr, in order,
// until fn returns false. It does nothing when arr is not an array.
func Elements(arr []byte, fn func(elem []byte) bool) {
	i := SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i = SkipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return
	}
	for i < len(arr) {
		n, err := Value(arr[i:])
		if err != nil || !fn(arr[i:i+n]) {
			return
		}
		i = SkipSpace(arr, i+n)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i = SkipSpace(arr, i+1)
	}
}

// Span is a range of bytes, [From, To).
type Span struct{ From, To uint32 }

// Doc is a JSON object, and where some of its members are when someone
// walking it earlier wrote that down: Member then answers for those
// without scanning.
//
// A Doc is either contiguous (Raw) or held in pieces (Pieces, Raw nil):
// the object is their concatenation and Spans are places in it. Member
// answers a known member that lies within one piece without joining.
type Doc struct {
	Raw    []byte
	Pieces [][]byte
	// Keys names the members Spans places; nil when none are known. A
	// known member whose Span is empty (To == 0) is absent.
	Keys  *[4]string
	Spans [4]Span
}

// Member returns the value of the first member named key, or nil.
func (d *Doc) Member(key string) []byte {
	v, _ := d.MemberIn(nil, key)
	return v
}

// MemberIn is Member for a caller that reuses memory: a value held in
// several pieces is joined into buf (from its start) rather than into a
// new slice. It returns the value and buf as it is after (grown, when it
// had to be), for the caller to reuse once done with the value; a value
// in one piece, or in Raw, is a slice of it, and buf is left as it was.
func (d *Doc) MemberIn(buf []byte, key string) (v, after []byte) {
	if d.Keys != nil {
		for i, k := range d.Keys {
			if k == key {
				if s := d.Spans[i]; s.To != 0 {
					return d.appendAt(buf, s)
				}
				return nil, buf
			}
		}
	}
	if d.Pieces == nil {
		return Member(d.Raw, key), buf
	}
	n := 0
	for _, p := range d.Pieces {
		n += len(p)
	}
	if cap(buf) < n {
		buf = make([]byte, 0, n) // once, the size of the object
	}
	buf = buf[:0]
	for _, p := range d.Pieces {
		buf = append(buf, p...)
	}
	return Member(buf, key), buf
}

// appendAt returns the bytes of s: a slice of the piece that holds
// them, or, when several do, those pieces' parts joined into buf (from
// its start), returned as after.
func (d *Doc) appendAt(buf []byte, s Span) (v, after []byte) {
	if d.Pieces == nil {
		return d.Raw[s.From:s.To], buf
	}
	joined := buf[:0]
	from := uint32(0)
	for _, p := range d.Pieces {
		to := from + uint32(len(p))
		if s.From >= from && s.To <= to {
			return p[s.From-from : s.To-from], buf
		}
		if to > s.From && from < s.To {
			joined = append(joined, p[max(s.From, from)-from:min(s.To, to)-from]...)
		}
		from = to
	}
	return joined, joined
}

// Bytes returns the object contiguous: Raw, or its pieces joined into a
// new slice, which the caller owns.
func (d *Doc) Bytes() []byte {
	if d.Pieces == nil {
		return d.Raw
	}
	return bytes.Join(d.Pieces, nil)
}

// Equal reports whether d and e hold the same bytes, however each is cut
// into pieces (what is known of their members aside), without joining
// them. Pieces two objects share (a chunk stored once) compare at once.
func (d *Doc) Equal(e *Doc) bool {
	var x, y []byte // what is left of the pieces being compared
	i, j := 0, 0
	for {
		for len(x) == 0 && i < d.pieces() {
			x, i = d.piece(i), i+1
		}
		for len(y) == 0 && j < e.pieces() {
			y, j = e.piece(j), j+1
		}
		if len(x) == 0 || len(y) == 0 {
			return len(x) == len(y)
		}
		n := min(len(x), len(y))
		if !bytes.Equal(x[:n], y[:n]) {
			return false
		}
		x, y = x[n:], y[n:]
	}
}

// pieces is how many pieces d is held in: Raw counts as one.
func (d *Doc) pieces() int {
	if d.Pieces == nil {
		return 1
	}
	return len(d.Pieces)
}

// piece returns piece k of d (k < pieces()).
func (d *Doc) piece(k int) []byte {
	if d.Pieces == nil {
		return d.Raw
	}
	return d.Pieces[k]
}

// IsObject reports whether the value is a JSON object, without joining
// the pieces of one held in pieces.
func (d *Doc) IsObject() bool {
	if d.Pieces == nil {
		i := SkipSpace(d.Raw, 0)
		return i < len(d.Raw) && d.Raw[i] == '{'
	}
	for _, p := range d.Pieces {
		if i := SkipSpace(p, 0); i < len(p) {
			return p[i] == '{'
		}
	}
	return false
}
