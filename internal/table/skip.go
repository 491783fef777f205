package table

import (
	"errors"

	"github.com/go-json-experiment/json/jsontext"
)

// Members a printer's view names only to pass over them. A member the
// view does not name is passed over too, but go-json-experiment's
// decoder passes over an unknown object or array a token at a time, and
// looks each unknown name up again case-folded; a member named with one
// of these types is read as one value (jsontext.Decoder.ReadValue, which
// checks it as strictly), so the bulk of a pod (its containers, volumes,
// labels, annotations) costs what a scan costs. Both decoders take them
// as they take a member the view does not name, or an empty struct, so
// the view reads what it read before (TestDecodeAsTheAPIServer,
// FuzzDecode; test/table against the API server's printer).

// anyValue is a member of any kind, ignored: as a member the view does
// not name.
type anyValue struct{}

func (*anyValue) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	_, err := d.ReadValue()
	return err
}

func (*anyValue) UnmarshalJSON([]byte) error { return nil }

// anObject is an object (or null) of which nothing is read: as an empty
// struct, whose decoding refuses any other kind.
type anObject struct{}

var errNotObject = errors.New("not an object")

func (*anObject) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if k := d.PeekKind(); k != '{' && k != 'n' {
		return errNotObject
	}
	_, err := d.ReadValue()
	return err
}

func (*anObject) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' && b[0] != 'n' {
		return errNotObject
	}
	return nil
}
