package jsonscan

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// byteComposite is Composite as it was before it read words: one byte at
// a time. The word reader must end every value where it ends.
func byteComposite(b []byte) (int, error) {
	var stack []byte
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			n, err := stringEnd(b[i:])
			if err != nil {
				return 0, err
			}
			i += n - 1
		case '{', '[':
			stack = append(stack, c)
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1]+2 != c {
				return 0, SyntaxError(b, i, "mismatched bracket")
			}
			if stack = stack[:len(stack)-1]; len(stack) == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, ErrShort
}

// checkComposite holds Composite to byteComposite on b, scanned whole and
// resumed after each prefix.
func checkComposite(t *testing.T, b []byte) {
	t.Helper()
	want, wantErr := byteComposite(b)
	var s Scanner
	got, err := s.Composite(b)
	if got != want || (err == nil) != (wantErr == nil) || (err == ErrShort) != (wantErr == ErrShort) {
		t.Fatalf("%q: Composite %d, %v; one byte at a time %d, %v", b, got, err, want, wantErr)
	}
	for k := 1; k < len(b); k++ {
		var s Scanner
		if n, err := s.Composite(b[:k]); err != ErrShort {
			if n != want {
				t.Fatalf("%q: the first %d bytes: %d, %v; want %d", b, k, n, err, want)
			}
			continue
		}
		if n, err := s.Composite(b); n != got || (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: resumed after %d bytes: %d, %v; want %d, %v", b, k, n, err, got, wantErr)
		}
	}
}

// wordDocs are values with quotes, backslashes and brackets at every
// place in a word as p (0 to 16 bytes) moves them: an escaped quote or
// backslash whose backslash ends a word, runs of backslashes, brackets
// inside strings (what TestCompositeWords and TestDroppedAgreesWithComposite
// read).
func wordDocs(p string) []string {
	return []string{
		`{"` + p + `\"":"]}"}`,
		`{"` + p + `\\":["\\\\\"",{"}":"{"}]}`,
		`["` + p + `","\\\\\\\\","a\"b",[[],{}],"` + p + `\\\""]`,
		`{"` + p + `":{"k:{\"type\":\"Ready\"}":{".":{},"f:status":{}}}} tail`,
	}
}

// TestCompositeWords: quotes, backslashes and brackets at every place in
// a word and across words: an escaped quote or backslash whose backslash
// ends a word, runs of backslashes, brackets inside strings, deep nesting.
func TestCompositeWords(t *testing.T) {
	var docs []string
	for pad := range 17 {
		p := strings.Repeat("x", pad)
		docs = append(append(docs, wordDocs(p)...),
			`{"`+p+`":[}`,
			`{"`+p+`":"\`,
			`[`+p+`]]`,
		)
	}
	docs = append(docs, strings.Repeat("[", 70)+strings.Repeat("]", 70), strings.Repeat(`{"a":`, 70)+"1"+strings.Repeat("}", 69)+"]")
	for _, d := range docs {
		checkComposite(t, []byte(d))
	}
	pod, err := os.ReadFile("../../cache/testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Value(pod); err != nil || n != len(pod) || !json.Valid(pod[:n]) {
		t.Fatalf("pod: %d, %v; want %d", n, err, len(pod))
	}
	checkComposite(t, pod[:2000])
}

// TestBytesEqual holds the word mask to a byte-by-byte comparison, on
// words whose bytes are c and its neighbours (a borrow or a carry would
// show there).
func TestBytesEqual(t *testing.T) {
	for c := range 256 {
		near := [...]byte{byte(c), byte(c + 1), byte(c - 1), byte(c ^ 0x80), 0, 0xff, 0x7f, 0x80}
		for k := range 1 << 12 {
			var w, want uint64
			for j := range 8 {
				v := near[(k>>(j*3/2)+j*k)%len(near)]
				w |= uint64(v) << (8 * j)
				if v == byte(c) {
					want |= 0x80 << (8 * j)
				}
			}
			if got := bytesEqual(w, byte(c)); got != want {
				t.Fatalf("bytesEqual(%#016x, %#x) = %#016x, want %#016x", w, c, got, want)
			}
		}
	}
}

// FuzzComposite: the word reader ends every value where the byte reader
// does, whole or resumed, and never panics.
func FuzzComposite(f *testing.F) {
	f.Add([]byte(`{"a":["b\"",{"c":null}]}`))
	f.Add([]byte(`["\\\\\\\"]",{}]`))
	f.Add([]byte(`{"abcdefg\\":"\"}"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || (b[0] != '{' && b[0] != '[') || len(b) > 4096 {
			return
		}
		if !json.Valid(b) {
			var s Scanner
			s.Composite(b) // only: no panic
			if strings.Contains(string(b), `\`) {
				return // a backslash outside strings: the two may differ on where invalid JSON ends
			}
		}
		checkComposite(t, b)
	})
}
