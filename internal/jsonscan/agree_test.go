package jsonscan

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// The scanner's invariant (ARCHITECTURE.md): on valid JSON it extracts
// what encoding/json extracts. Member finds the first member of a name,
// where encoding/json's map keeps the last, so the tests below compare on
// objects without repeated keys, which is what an API server sends.

// firstMembers decodes the members of the JSON object b with encoding/json,
// keeping the first value of each name; ok is false when b is not an
// object or repeats a key.
func firstMembers(b []byte) (members map[string]json.RawMessage, order []string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	members = map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		key := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		if _, dup := members[key]; dup {
			return nil, nil, false
		}
		members[key] = v
		order = append(order, key)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, false
	}
	return members, order, true
}

// sameJSON reports whether a and b are the same JSON value once compacted.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// checkAgreesWithEncodingJSON holds Member, Object, String and Elements to
// encoding/json on the object b.
func checkAgreesWithEncodingJSON(t *testing.T, b []byte) {
	if !json.Valid(b) {
		return
	}
	want, order, ok := firstMembers(b)
	if !ok {
		return
	}
	// Member: each name gives encoding/json's value, byte for byte but
	// for the space encoding/json's RawMessage keeps around it.
	for key, v := range want {
		got := Member(b, key)
		if !bytes.Equal(got, bytes.TrimSpace(v)) {
			t.Fatalf("Member(%q) of %s = %q; encoding/json reads %q", key, b, got, v)
		}
		// String decodes what encoding/json decodes.
		var s string
		if bytes.HasPrefix(got, []byte{'"'}) && json.Unmarshal(v, &s) == nil {
			if got, err := String(got); err != nil || got != s {
				t.Fatalf("String(%s) = %q, %v; encoding/json decodes %q", v, got, err, s)
			}
		}
		// Elements yields encoding/json's elements, in order.
		var elems []json.RawMessage
		if json.Unmarshal(v, &elems) == nil {
			i := 0
			Elements(got, func(e []byte) bool {
				if i >= len(elems) || !sameJSON(e, elems[i]) {
					t.Fatalf("element %d of %s: %q; encoding/json reads %d elements", i, v, e, len(elems))
				}
				i++
				return true
			})
			if i != len(elems) {
				t.Fatalf("Elements of %s gave %d; encoding/json reads %d", v, i, len(elems))
			}
		}
	}
	// Object walks the members in order, with the keys encoding/json
	// decodes, and ends where the object does.
	r, err := OpenObject(b, 0)
	if err != nil {
		t.Fatalf("OpenObject(%s): %v", b, err)
	}
	for i := 0; ; i++ {
		more, err := r.Next()
		if err != nil {
			t.Fatalf("Next in %s: %v", b, err)
		}
		if !more {
			if i != len(order) {
				t.Fatalf("Object walked %d members of %s; encoding/json reads %d", i, b, len(order))
			}
			break
		}
		if i >= len(order) || !KeyIs(r.Key, order[i]) {
			t.Fatalf("member %d of %s: key %q; encoding/json reads %q", i, b, r.Key, order)
		}
		if _, err := r.Skip(); err != nil {
			t.Fatalf("Skip in %s: %v", b, err)
		}
	}
	if end := r.End(); SkipSpace(b, end) != len(b) {
		t.Fatalf("Object of %s ends at %d, before the end", b, end)
	}
}

func TestAgreesWithEncodingJSON(t *testing.T) {
	for _, doc := range []string{
		`{}`,
		` { "a" : 1 , "b" : [ 1 , "x" , { "c" : null } ] } `,
		`{"k\u0069nd":"Pod","s":"a\"b\\c\u00e9\ud83d\ude00","e":[]}`,
		`{"metadata":{"name":"web-0","labels":{"app.kubernetes.io/name":"web"}},"status":{"podIPs":[{"ip":"10.0.0.1"},{"ip":"fd00::1"}]}}`,
		"{\"invalid UTF-8 \xff\":\"\xfe\xc3\",\"ok\":\"\u00e9\xc3\xa9\"}",
		`{"n":-1.5e+10,"t":true,"f":false,"z":null,"deep":[[[[{"x":[{}]}]]]]}`,
	} {
		checkAgreesWithEncodingJSON(t, []byte(doc))
	}
}

// FuzzAgreesWithEncodingJSON: on any valid object without repeated keys,
// what the scanner extracts is what encoding/json extracts.
func FuzzAgreesWithEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"a":"x","b":{"c":[1,2,{"d":"\u0041"}]}}`))
	f.Add([]byte(`{"\u0061":[" ]\"",{}],"b":-0.0e1}`))
	f.Fuzz(checkAgreesWithEncodingJSON)
}
