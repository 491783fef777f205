package table

// maxScanDepth bounds skipBytes's nesting: deeper values it gives up on.
const maxScanDepth = 64

// skipBytes is skip as it was before it read words (scan_words.go), a
// token at a time: the reference the word scan is held to
// (TestSkipAgreesWithSkipBytes, FuzzSkip). It passes over one value,
// checking its syntax; depth is the nesting it is at.
func (s *scanner) skipBytes(depth int) bool {
	var open [maxScanDepth]byte
	n := 0
	for {
		// A value.
		switch s.peek() {
		case '"':
			if _, ok := s.rawString(false); !ok {
				return false
			}
		case '{', '[':
			c := s.b[s.i]
			s.i++
			if s.peek() == c+2 { // '{'+2 == '}', '['+2 == ']'
				s.i++
				break
			}
			if depth+n >= maxScanDepth {
				return false
			}
			open[n] = c
			n++
			if c == '{' && !s.nameBytes() {
				return false
			}
			continue
		case 't':
			if !s.literal("true") {
				return false
			}
		case 'f':
			if !s.literal("false") {
				return false
			}
		case 'n':
			if !s.literal("null") {
				return false
			}
		default:
			if _, ok := s.number(); !ok {
				return false
			}
		}
		// After it: the ends of the arrays and objects it ends, then a
		// comma and the next element or member.
		for {
			if n == 0 {
				return true
			}
			c := s.peek()
			if c == open[n-1]+2 {
				s.i++
				n--
				continue
			}
			if c != ',' {
				return false
			}
			s.i++
			if open[n-1] == '{' && !s.nameBytes() {
				return false
			}
			break
		}
	}
}

// nameBytes passes over a member's name and its colon.
func (s *scanner) nameBytes() bool {
	if s.peek() != '"' {
		return false
	}
	if _, ok := s.rawString(false); !ok {
		return false
	}
	if s.peek() != ':' {
		return false
	}
	s.i++
	return true
}
