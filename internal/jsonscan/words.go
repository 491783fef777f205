package jsonscan

import "encoding/binary"

// Composite reads a value eight bytes at a time, as a uint64 whose lowest
// byte comes first in the text. Every mask below has the high bit (0x80)
// of a byte set for each byte it selects, and no other bit.

const (
	lows   = 0x0101010101010101
	sevens = 0x7f7f7f7f7f7f7f7f // each byte's low seven bits
)

// wordAt is b[i:i+8] as a word.
func wordAt(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i : i+8]) }

// bytesEqual selects the bytes of w equal to c. Exact: no borrow crosses
// from one byte to the next.
func bytesEqual(w uint64, c byte) uint64 { return ZeroBytes(w ^ (lows * uint64(c))) }

// ZeroBytes selects the bytes of v (a word as wordAt reads one: its
// lowest byte first) that are zero, exactly, with the high bit (0x80) of
// each such byte and no other bit.
func ZeroBytes(v uint64) uint64 {
	// A byte's low seven bits plus 0x7f carry into its high bit unless
	// they are all zero; with the byte's own high bit, that is every
	// byte but zero.
	return ^((v&sevens + sevens) | v | sevens)
}

// prefixXor selects each byte after an odd number of the selected bytes
// up to it (itself included): with quotes, a string's opening quote and
// its contents, not its closing quote.
func prefixXor(m uint64) uint64 {
	m ^= m << 8
	m ^= m << 16
	m ^= m << 32
	return m
}

// unescaped removes from quotes those escaped by a backslash, and reports
// whether the last byte is a backslash that escapes the next word's first
// byte. escaped says that this word's first byte is escaped. A backslash
// escapes the byte after it unless it is escaped itself; backslashes are
// rare, so they are taken one at a time.
func unescaped(quotes, backslashes uint64, escaped bool) (uint64, bool) {
	var esc uint64
	if escaped {
		esc = 0x80
	}
	for bs := backslashes; bs != 0; bs &= bs - 1 {
		bit := bs & -bs
		if esc&bit != 0 {
			continue
		}
		if bit == 1<<63 {
			return quotes &^ esc, true
		}
		esc |= bit << 8
	}
	return quotes &^ esc, false
}
