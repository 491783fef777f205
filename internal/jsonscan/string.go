package jsonscan

import "encoding/json"

// AppendString appends s as a JSON string, byte for byte as encoding/json
// encodes it. Names, UIDs, kinds, phases and addresses are plain ASCII and
// are copied as they are; anything else (escapes, HTML characters,
// non-ASCII) is left to encoding/json itself. It is the one JSON string
// encoder of the hand-written encoders (cache's objects, server's answers).
func AppendString(b []byte, s string) []byte {
	if !plain(s) {
		enc, _ := json.Marshal(s) // a string always encodes
		return append(b, enc...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// StringLen is len(AppendString(nil, s)), without allocating for a plain
// string.
func StringLen(s string) int {
	if !plain(s) {
		return len(AppendString(nil, s))
	}
	return len(s) + 2
}

// plain reports whether encoding/json writes s as it is, between quotes.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
