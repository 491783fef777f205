package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		fail bool // a syntax error; otherwise ErrShort when n < 0
	}{
		{`{"a":[1,{"b":"c\"}"}],"d":"\\"}x`, 31, false},
		{`"a\\\"b" `, 8, false},
		{`[]`, 2, false},
		{`true,`, 4, false},
		{`12`, -1, false},
		{`{"a":"b}`, -1, false},
		{`{"a":"b\`, -1, false},
		{`{"a":[}`, 0, true},
		{`]`, 0, true},
		{`{"a":1}}`, 7, false},
	} {
		n, err := Value([]byte(tc.in))
		switch {
		case tc.fail:
			if err == nil || err == ErrShort {
				t.Errorf("%s: %d, %v; want a syntax error", tc.in, n, err)
			}
		case tc.n < 0:
			if err != ErrShort {
				t.Errorf("%s: %d, %v; want ErrShort", tc.in, n, err)
			}
		case err != nil || n != tc.n:
			t.Errorf("%s: %d, %v; want %d", tc.in, n, err, tc.n)
		}
	}
}

// TestScannerResumes: a value handed over a byte at a time ends where a
// whole scan ends.
func TestScannerResumes(t *testing.T) {
	doc := []byte(`{"a":"x\\\"y","b":[{"c":"]\\\\"},[]],"d":{}} tail`)
	whole, err := Value(doc)
	if err != nil {
		t.Fatal(err)
	}
	var s Scanner
	for i := 1; i <= len(doc); i++ {
		n, err := s.Composite(doc[:i])
		if err == ErrShort {
			continue
		}
		if err != nil || n != whole || i != whole {
			t.Fatalf("resumed scan: %d, %v at %d; want %d", n, err, i, whole)
		}
		return
	}
	t.Fatal("never completed")
}

func TestMemberAndElements(t *testing.T) {
	doc := []byte(`{"a":1,"b\u0031":{"c":[{"ip":"x"},{"ip":"y"},3]},"b1":"second"}`)
	if got := string(Member(doc, "b1")); got != `{"c":[{"ip":"x"},{"ip":"y"},3]}` {
		t.Errorf("Member b1 = %s", got)
	}
	var ips []string
	Elements(Member(Member(doc, "b1"), "c"), func(e []byte) bool {
		if v := Member(e, "ip"); v != nil {
			s, _ := String(v)
			ips = append(ips, s)
		}
		return true
	})
	if len(ips) != 2 || ips[0] != "x" || ips[1] != "y" {
		t.Errorf("elements: %v", ips)
	}
	if Member([]byte(`[1]`), "a") != nil || Member(doc, "zz") != nil {
		t.Error("Member found what is not there")
	}
}

// FuzzValue: Value agrees with encoding/json on where valid JSON ends, and
// nothing panics.
func FuzzValue(f *testing.F) {
	f.Add([]byte(`{"a":["b",{"c":null}]}`))
	f.Add([]byte(`"\\\""`))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Value(b)
		if !json.Valid(b) || len(b) == 0 || (b[0] != '{' && b[0] != '[' && b[0] != '"') {
			return
		}
		if err != nil || n != len(bytes.TrimRight(b, " \t\r\n")) {
			t.Fatalf("valid %q: %d, %v", b, n, err)
		}
	})
}

// TestMemberIn: a member of a document held in pieces, cut anywhere, is
// the member of the whole bytes, with the members' places known (Keys)
// and not; one that spans pieces is joined into the buffer given, which
// then needs no new memory, and one inside a piece is a slice of it.
func TestMemberIn(t *testing.T) {
	whole := []byte(`{"a":"x","list":[{"image":"i1"},{"image":"i2"}],"b":{"c":1}}`)
	keys := [4]string{"a", "list", "b", "none"}
	var spans [4]Span
	for i, k := range keys[:3] {
		v := Member(whole, k)
		from := bytes.Index(whole, v)
		spans[i] = Span{From: uint32(from), To: uint32(from + len(v))}
	}
	for cut1 := 1; cut1 < len(whole); cut1++ {
		for _, cut2 := range []int{cut1, min(cut1+7, len(whole))} {
			pieces := [][]byte{whole[:cut1], whole[cut1:cut2], whole[cut2:]}
			for _, known := range []bool{false, true} {
				d := Doc{Pieces: pieces}
				if known {
					d.Keys, d.Spans = &keys, spans
				}
				buf := make([]byte, 0, len(whole))
				for _, k := range keys {
					want := Member(whole, k)
					got, after := d.MemberIn(buf, k)
					if !bytes.Equal(got, want) {
						t.Fatalf("cut %d,%d known %t: member %q = %q, want %q", cut1, cut2, known, k, got, want)
					}
					if cap(after) != cap(buf) || &after[:1][0] != &buf[:1][0] {
						t.Fatalf("cut %d,%d known %t: member %q joined into new memory", cut1, cut2, known, k)
					}
				}
			}
		}
	}
	d := Doc{Pieces: [][]byte{whole[:20], whole[20:]}, Keys: &keys, Spans: spans}
	buf := make([]byte, 0, len(whole))
	if allocs := testing.AllocsPerRun(10, func() { d.MemberIn(buf, "list") }); allocs != 0 {
		t.Errorf("%v allocations joining a member into a buffer with room", allocs)
	}
}

// TestDocEqual: two documents are equal exactly when their bytes are,
// however each is cut into pieces (empty ones included), without
// joining them.
func TestDocEqual(t *testing.T) {
	cuts := func(b []byte, at ...int) Doc {
		if len(at) == 0 {
			return Doc{Raw: b}
		}
		var pieces [][]byte
		from := 0
		for _, c := range at {
			c = min(c, len(b))
			pieces = append(pieces, b[from:c])
			from = max(from, c)
		}
		return Doc{Pieces: append(pieces, b[from:])}
	}
	a := []byte(`{"a":"x","list":[{"image":"i1"}]}`)
	for _, tc := range []struct {
		b    string
		want bool
	}{
		{string(a), true},
		{`{"a":"x","list":[{"image":"i2"}]}`, false},
		{`{"a":"x","list":[{"image":"i1"}]} `, false},
		{`{"a":"x","list":[{"image":"i1"}]`, false},
		{``, false},
	} {
		b := []byte(tc.b)
		for c1 := 0; c1 <= len(a); c1++ {
			for _, c2 := range []int{c1, c1 + 5} {
				for _, db := range []Doc{cuts(b), cuts(b, 3, 3, 17), cuts(b, c2)} {
					for _, da := range []Doc{cuts(a, c1), cuts(a, c1, c2)} {
						if got := da.Equal(&db); got != tc.want {
							t.Fatalf("%q cut at %d,%d against %q in %d pieces: Equal %t, want %t", a, c1, c2, b, len(db.Pieces), got, tc.want)
						}
						if got := db.Equal(&da); got != tc.want {
							t.Fatalf("%q in %d pieces against %q cut at %d,%d: Equal %t, want %t", b, len(db.Pieces), a, c1, c2, got, tc.want)
						}
					}
				}
			}
		}
	}
	if !(&Doc{}).Equal(&Doc{Pieces: [][]byte{{}, nil}}) {
		t.Error("an absent document and empty pieces differ")
	}
	x, y := cuts(a, 7, 20), cuts(bytes.Clone(a), 11)
	if allocs := testing.AllocsPerRun(10, func() { x.Equal(&y) }); allocs != 0 {
		t.Errorf("%v allocations comparing documents in pieces", allocs)
	}
}
