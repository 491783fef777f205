package table

import (
	jsonv2 "github.com/go-json-experiment/json"
	sigsjson "sigs.k8s.io/json"
)

// decode reads the JSON of an object into a printer's view of it as the
// API server reads JSON into its types (sigs.k8s.io/json: member names
// matched case-sensitively, unknown members ignored, the types' own
// UnmarshalJSON for times and quantities).
//
// Decoding is most of what a row costs, and a question over a column
// renders the row of every object it reads, so the JSON is decoded by
// go-json-experiment's decoder, which skips what the view does not name
// without building it. Where the two decoders could differ (duplicate
// member names, invalid UTF-8, anything else it rejects), it refuses
// rather than guesses, and the view is decoded again by sigs.k8s.io/json,
// which is the reference: what decode fills is always what
// sigs.k8s.io/json fills (TestDecodeAsTheAPIServer, FuzzDecode).
func decode[T any](raw []byte, obj *T) error {
	if jsonv2.Unmarshal(raw, obj) == nil {
		return nil
	}
	*obj = *new(T)
	return sigsjson.UnmarshalCaseSensitivePreserveInts(raw, obj)
}
