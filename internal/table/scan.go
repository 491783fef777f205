package table

import (
	"encoding/binary"
	"math/bits"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// An allocation-free reader of JSON text for the hand-written decoders
// of printers' views (pods_scan.go). What it reads it reads strictly, as
// encoding/json reads syntax (RFC 8259: literals and numbers spelled
// out, strings without control characters and with valid escapes, any
// byte of 0x80 and above inside strings): the objects and arrays a view
// reads, their members' names, commas and colons, every value it reads
// and every string, number and literal it passes over. An object or an
// array it passes over whole (skip) it only reads to its end: the JSON
// it is given is what an API server wrote, which is valid, and on valid
// JSON what it reads is what sigs.k8s.io/json reads. Anything it does
// not decode itself (a string it reads with an escape or a byte outside
// ASCII, a member it reads given twice) makes it give up: the caller
// then decodes the document with decode, the reference.

// plainInString are the bytes a string's body is read past without a
// second look: not a quote, a backslash, a control character or, for the
// strings the views read, a byte outside ASCII.
var plainInString = func() (t [256]byte) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = 1
	}
	t['"'], t['\\'] = 0, 0
	for c := 0x80; c < 0x100; c++ {
		t[c] = 2 // allowed in a skipped string, not in one read
	}
	return t
}()

// scanner reads b from i on; a method that returns false leaves it at
// no particular place, and the document is decoded by decode instead.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	if s.i < len(s.b) && s.b[s.i] > ' ' { // compact JSON: mostly none
		return
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek is the byte at the next value, after white space; 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// skip passes over one value. A number, a literal or a string it checks
// as encoding/json does; an object or an array, most of a pod's bytes
// and none of them read, it passes over with jsonscan.Dropped, a word at
// a time, checking only that its strings close and its brackets
// balance: the cache holds what an API server wrote, and on valid JSON
// Dropped ends a value where a strict reading does (TestSkipEndsValues,
// FuzzSkip).
func (s *scanner) skip() bool {
	switch s.peek() {
	case '{', '[':
		n, err := jsonscan.Dropped(s.b[s.i:])
		s.i += n
		return err == nil
	case '"':
		_, ok := s.rawString(false)
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	_, ok := s.number()
	return ok
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// null reads a null, if the next value is one.
func (s *scanner) null() bool {
	return s.peek() == 'n' && s.literal("null")
}

// number passes over a number as JSON spells it and returns its text.
func (s *scanner) number() ([]byte, bool) {
	b, start, i := s.b, s.i, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return b[start:i], true
}

// rawString passes over the string at s.i and returns its body. With
// plain, it gives up on an escape or a byte outside ASCII (a string the
// view reads: decode turns those into what it would have to reproduce);
// without, it checks them as encoding/json does and goes on.
func (s *scanner) rawString(plain bool) ([]byte, bool) {
	b := s.b
	if s.i >= len(b) || b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	i := start
	for {
		for i+8 <= len(b) {
			m := stopsIn(binary.LittleEndian.Uint64(b[i : i+8]))
			if m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		for i < len(b) && plainInString[b[i]] == 1 {
			i++
		}
		if i >= len(b) {
			return nil, false
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return b[start:i], true
		case plain || c < 0x20:
			return nil, false
		case c >= 0x80:
			i++
		default: // a backslash
			if i+1 >= len(b) {
				return nil, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !hex4(b[i+2:i+6]) {
					return nil, false
				}
				i += 6
			default:
				return nil, false
			}
		}
	}
}

// stopsIn selects the bytes of w, eight bytes of a string read as a
// word whose lowest byte comes first, that a string's body is not read
// past at once (plainInString): a quote, a backslash, a control
// character (its three high bits clear), or a byte of 0x80 and above;
// each by the high bit of its byte (jsonscan.ZeroBytes).
func stopsIn(w uint64) uint64 {
	const lows, highs = 0x0101010101010101, 0x8080808080808080
	return jsonscan.ZeroBytes(w^(lows*'"')) | jsonscan.ZeroBytes(w^(lows*'\\')) | jsonscan.ZeroBytes(w&(lows*0xe0)) | w&highs
}

func hex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// object reads an object's members, calling member with the scanner at
// each value and the member's name (its raw body: a name with an escape
// is given up on, as it could spell one the view reads); member must
// read the value.
func (s *scanner) object(member func(s *scanner, name []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		name, ok := s.rawString(true)
		if !ok || s.peek() != ':' {
			return false
		}
		s.i++
		if !member(s, name) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem with the scanner at each element;
// elem must read it.
func (s *scanner) array(elem func(s *scanner) bool) bool {
	if s.peek() != '[' {
		return false
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		s.ws()
		if !elem(s) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// end reports whether nothing but white space is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}
