package table

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// checkSkip holds skip to skipBytes, the strict token-at-a-time scan it
// replaced, on the value b starts with (after any space): wherever
// skipBytes reads a value, which is then valid JSON, skip reads it and
// ends it at the same byte, and refuses every part of it that ends
// before that byte.
func checkSkip(t *testing.T, b []byte, prefixes bool) {
	t.Helper()
	lax, strict := scanner{b: b}, scanner{b: b}
	ok, want := lax.skip(), strict.skipBytes(1)
	if !want {
		return
	}
	if !json.Valid(b[:strict.i]) {
		t.Fatalf("%q: skipBytes reads %q, which is not JSON", b, b[:strict.i])
	}
	if !ok || lax.i != strict.i {
		t.Fatalf("%q: skip %v at %d; skipBytes reads to %d", b, ok, lax.i, strict.i)
	}
	if c := bytes.TrimLeft(b, " \t\n\r"); !prefixes || c[0] != '{' && c[0] != '[' {
		return
	}
	for k := strict.i - 1; k > 0; k-- {
		s := scanner{b: b[:k]}
		if s.skip() {
			t.Fatalf("%q: skip reads its first %d bytes, to %d", b, k, s.i)
		}
	}
}

// skipDocs are values of every kind a pod holds and of those it could:
// escapes of every kind, unicode, control characters, nulls, nested
// arrays, numbers in exponent form, white space, each starting at every
// place in a word.
func skipDocs(t testing.TB) []string {
	var docs []string
	pod, err := os.ReadFile("../../cache/testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, pod, "", "\t"); err != nil {
		t.Fatal(err)
	}
	docs = append(docs, string(pod), pretty.String())
	for _, raw := range variedPods(20, 3) {
		docs = append(docs, string(raw))
	}
	values := []string{
		`{}`, `[]`, `[{}]`, `{"a":[]}`, `[[[[[]]]],[[]]]`, ` { "a" : [ 1 , 2 ] , "b" : { } } `,
		"{\n\t\"a\":\r\n1}",
		`{"a":"b","c":"d","ef":"ghijklmnopq","r":""}`,
		`{"a":"\"","b":"\\","c":"\/\b\f\n\r\t","d":"\u00e9\uD83D\uDE00","e":"x\\\"y\\"}`,
		`{"a\"b":1,"\\":2,"\u0041":3}`,
		`{"a":"ünïcode ✓ 日本","b":"` + "\xff\xfe" + `"}`,
		`{"a":null,"b":true,"c":false,"d":[null,true,false]}`,
		`[0,-0,1,-1,0.5,-0.5,1e2,1E+2,1e-2,-1.5e10,123456789012345678901234567890,0e0]`,
		`{"a":{"b":{"c":{"d":[1,[2,[3,[4]]]]}}}}`,
		`[{"a":[{"b":[{"c":[]}]}]},{}]`,
	}
	bad := []string{
		`{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":+1}`,
		`{"a":1 2}`, `{"a" "b"}`, `{"a":"b",}`, `[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{:1}`, `{1:2}`,
		`{"a":"b"]`, `[1}`, `{"a":[}`, `[[]`, `{"a":1`, `{"a":"b`, `{"a":"b\`, `{"a":"\x"}`, `{"a":"\u12"}`,
		`{"a":"\u12g4"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\x1f\"}", "{\"a\":1\x01}", "{\"a\":1\x0b}",
		`{"a":1}}`, `{"a":x}`, `{"a":\"b"}`, "{\"a\":\xc3\xa9}", `{"a":'b'}`, `[true false]`, `[null,]`, `{"a":[1,2]]`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":}`, `{"abcdefgh":"ijklmnop","q":tr}`,
	}
	values = append(values, bad...)
	for pad := range 9 {
		p := strings.Repeat(" ", pad)
		q := strings.Repeat("x", pad)
		for _, v := range values {
			docs = append(docs, p+v, `{"`+q+`":`+v+`}`, `[`+p+v+`,`+q+`]`, `["`+q+`",`+v+`]`)
		}
	}
	docs = append(docs,
		strings.Repeat("[", maxScanDepth-1)+strings.Repeat("]", maxScanDepth-1),
		strings.Repeat("[", maxScanDepth)+strings.Repeat("]", maxScanDepth),
		strings.Repeat("[", maxScanDepth+1)+strings.Repeat("]", maxScanDepth+1),
		strings.Repeat(`{"a":`, maxScanDepth-1)+"{}"+strings.Repeat("}", maxScanDepth-1),
		strings.Repeat(`{"a":`, maxScanDepth)+"1"+strings.Repeat("}", maxScanDepth),
		strings.Repeat(`[{"a":`, 40)+"1"+strings.Repeat("}]", 40),
	)
	return docs
}

// TestSkipEndsValues: skip ends every value skipBytes reads where
// skipBytes ends it, and reads no part of one, on the values of skipDocs;
// on a value of a pod with each byte replaced by each byte that matters
// to the grammar, and removed.
func TestSkipEndsValues(t *testing.T) {
	valid := 0
	for _, d := range skipDocs(t) {
		checkSkip(t, []byte(d), len(d) < 2000)
		if json.Valid([]byte(d)) {
			valid++
		}
	}
	if valid < 400 {
		t.Fatalf("%d of the documents are JSON", valid)
	}
	base := []byte(`{"name":"c0","image":"app:v1","args":["--x","-y=\"z\""],"env":[{"name":"A","value":"1"}],` +
		`"ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{"limits":{"cpu":"1.5"}},"x":[null,true,false,-1.5e+3,{}],"ü":"é\u00e9"}`)
	marks := []byte("\"\\{}[],: \t\n\x01\x80xe0-.tnu/")
	for k := range base {
		b := bytes.Clone(base)
		for _, c := range marks {
			b[k] = c
			checkSkip(t, b, false)
		}
		checkSkip(t, append(bytes.Clone(base[:k]), base[k+1:]...), false)
	}
}

// FuzzSkip: whatever the bytes, skip ends every value skipBytes reads
// where skipBytes ends it, and never panics.
func FuzzSkip(f *testing.F) {
	for _, d := range skipDocs(f)[:60] {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSkip(t, b, len(b) < 2000)
		s := scanner{b: b}
		s.skip()
	})
}
