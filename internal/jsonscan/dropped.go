package jsonscan

import "math/bits"

// Dropped returns the length of the object or array b starts with, as
// Composite does, for a value the caller will not keep (an object's
// managedFields, cut out as it is read). It checks that strings close and
// that brackets balance, but not that each closing bracket is of its
// opening one's kind: it counts the brackets of a word at once, and looks
// at them one by one only in a word where the value may end. On valid
// JSON it returns what Composite returns (TestDroppedAgreesWithComposite).
// ErrShort when b ends first; it does not resume.
func Dropped(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, ErrShort
	}
	if b[0] != '{' && b[0] != '[' {
		return 0, SyntaxError(b, 0, "expected an object or an array")
	}
	i, depth := 0, 0
	var inStr, escaped bool
	for i+8 <= len(b) {
		w := wordAt(b, i)
		quotes, backslashes := bytesEqual(w, '"'), bytesEqual(w, '\\')
		if backslashes != 0 || escaped {
			quotes, escaped = unescaped(quotes, backslashes, escaped)
		}
		inside := prefixXor(quotes)
		if inStr {
			inside = ^inside
		}
		inStr = inside>>63 != 0
		lower := w | 0x2020202020202020
		opens, closes := bytesEqual(lower, '{')&^inside, bytesEqual(lower, '}')&^inside
		if n := bits.OnesCount64(closes); n < depth { // the value goes on past this word
			depth += bits.OnesCount64(opens) - n
			if depth > maxNesting {
				return 0, SyntaxError(b, i, "nested too deeply")
			}
			i += 8
			continue
		}
		for brackets := opens | closes; brackets != 0; brackets &= brackets - 1 {
			bit := brackets & -brackets
			if opens&bit != 0 {
				depth++
				continue
			}
			depth--
			if depth == 0 {
				return i + bits.TrailingZeros64(bit)/8 + 1, nil
			}
		}
		if depth > maxNesting {
			return 0, SyntaxError(b, i, "nested too deeply")
		}
		i += 8
	}
	if escaped {
		i--
	}
	if inStr {
		var ok bool
		if i, ok = closeString(b, i); !ok {
			return 0, ErrShort
		}
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			var ok bool
			if i, ok = closeString(b, i+1); !ok {
				return 0, ErrShort
			}
			i--
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, ErrShort
}
