// Package openapi holds kubeindex's OpenAPI 3.0 document, embedded in the
// binary. The server serves it at /openapi.json; server/openapi_test.go
// checks that it is valid, that it and the route table describe the same
// routes, and that real responses match its schemas.
package openapi

import _ "embed"

// Spec is the document's JSON. It is shared: do not modify it.
//
//go:embed openapi.json
var Spec []byte
