package jsonscan

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// checkDropped holds Dropped to Composite on b: where Composite finds the
// end, Dropped finds the same; where Composite needs more bytes, so does
// Dropped, at every prefix of b. Where Composite finds a syntax error
// (a closing bracket of the wrong kind), Dropped may find an end.
func checkDropped(t *testing.T, b []byte) {
	t.Helper()
	var s Scanner
	want, wantErr := s.Composite(b)
	got, err := Dropped(b)
	if wantErr == nil && (err != nil || got != want) {
		t.Fatalf("%q: Dropped %d, %v; Composite %d", b, got, err, want)
	}
	if wantErr == ErrShort && err != ErrShort {
		t.Fatalf("%q: Dropped %d, %v; Composite needs more bytes", b, got, err)
	}
	if wantErr != nil {
		return
	}
	for k := 1; k < want; k++ {
		if n, err := Dropped(b[:k]); err != ErrShort {
			t.Fatalf("%q: the first %d bytes: %d, %v; want ErrShort", b, k, n, err)
		}
	}
}

// TestDroppedAgreesWithComposite: the value ends where Composite ends it
// with the brackets that end it at every place in a word, after words
// that do not end it, and with quotes, backslashes and brackets in
// strings: a pod's managedFields, and the words TestCompositeWords reads.
func TestDroppedAgreesWithComposite(t *testing.T) {
	var docs []string
	for pad := range 17 {
		p := strings.Repeat("x", pad)
		docs = append(append(docs, wordDocs(p)...),
			`[{"`+p+`":{}},{},[[{"a":[]}]],"]]]]]]]]"]]]`,
			`{"`+p+`":"\`,
			`[`+p+`]]`,
			`[`+p+`]`,
		)
	}
	docs = append(docs, strings.Repeat("[", 70)+strings.Repeat("]", 70), strings.Repeat(`{"a":`, 70)+"1"+strings.Repeat("}", 70))
	pod, err := os.ReadFile("../../cache/testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(pod, []byte(`"managedFields":`)) + len(`"managedFields":`)
	docs = append(docs, string(pod), string(pod[at:]))
	for _, d := range docs {
		checkDropped(t, []byte(d))
	}
	for _, bad := range []string{``, ` []`, `"a"`, `1`} {
		if n, err := Dropped([]byte(bad)); err == nil {
			t.Errorf("Dropped(%q) = %d; want an error", bad, n)
		}
	}
	deep := []byte(strings.Repeat("[", maxNesting+100))
	if _, err := Dropped(deep); err == nil || err == ErrShort {
		t.Errorf("Dropped of %d open brackets: %v; want nested too deeply", len(deep), err)
	}
}

// FuzzDropped: Dropped ends every value where Composite does, needs more
// bytes where it does, and never panics.
func FuzzDropped(f *testing.F) {
	f.Add([]byte(`{"a":["b\"",{"c":null}]}`))
	f.Add([]byte(`[{"f:x":{}},{".":{},"k:{\"a\":\"b\"}":{}}]`))
	f.Add([]byte(`["\\\\\\\"]",{}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		Dropped(b) // no panic
		if len(b) == 0 || (b[0] != '{' && b[0] != '[') || bytes.IndexByte(b, '\\') >= 0 && !validStrings(b) {
			return
		}
		checkDropped(t, b)
	})
}

// validStrings reports whether b's backslashes are all inside strings,
// where the two readers agree on what they escape.
func validStrings(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			in = !in
		case b[i] == '\\':
			if !in {
				return false
			}
			i++
		}
	}
	return true
}

// BenchmarkDropped passes over a pod's managedFields (5 KB, a bracket
// every eight bytes) with Composite and with Dropped, in turn.
//
//	go test -run XXX -bench Dropped -count 6 ./internal/jsonscan
func BenchmarkDropped(b *testing.B) {
	pod, err := os.ReadFile("../../cache/testdata/pod.json")
	if err != nil {
		b.Fatal(err)
	}
	at := bytes.Index(pod, []byte(`"managedFields":`)) + len(`"managedFields":`)
	var s Scanner
	n, err := s.Composite(pod[at:])
	if err != nil {
		b.Fatal(err)
	}
	mf := pod[at : at+n]
	for _, c := range []struct {
		name string
		skip func([]byte) (int, error)
	}{{"composite", s.Composite}, {"dropped", Dropped}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(mf)))
			for b.Loop() {
				if got, err := c.skip(mf); got != n || err != nil {
					b.Fatal(got, err)
				}
			}
		})
	}
}

// TestSkipDropped: an object's members passed over with SkipDropped end
// where Skip ends them, whatever their kind (managedFields may be null).
func TestSkipDropped(t *testing.T) {
	doc := []byte(`{"a":null,"b":[{"f:x":{}},"]"],"c":"x\"}","d":{"e":[1,{}]},"f":12,"g":[]}`)
	skip, dropped := mustOpen(t, doc), mustOpen(t, doc)
	for {
		more, err := skip.Next()
		more2, err2 := dropped.Next()
		if err != nil || err2 != nil || more != more2 {
			t.Fatalf("Next: %v, %v; %v, %v", more, err, more2, err2)
		}
		if !more {
			break
		}
		want, err := skip.Skip()
		got, err2 := dropped.SkipDropped()
		if err != nil || err2 != nil || got != want {
			t.Fatalf("member %s: SkipDropped %d, %v; Skip %d, %v", skip.Key, got, err2, want, err)
		}
	}
	if dropped.End() != len(doc) {
		t.Fatalf("ended at %d of %d", dropped.End(), len(doc))
	}
	r := mustOpen(t, []byte(`{"a":[`))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SkipDropped(); err != ErrShort {
		t.Fatalf("SkipDropped of a cut array: %v; want ErrShort", err)
	}
}

func mustOpen(t *testing.T, b []byte) Object {
	t.Helper()
	r, err := OpenObject(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
