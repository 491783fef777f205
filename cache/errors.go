package cache

import "errors"

// Errors returned by the query methods. The HTTP layer maps each to a status
// code once; messages wrapping them are written for the person who asked.
var (
	// ErrUnknownResource: the resource is not configured (404).
	ErrUnknownResource = errors.New("resource is not cached")
	// ErrUnknownIndex: the resource has no index by that name (400).
	ErrUnknownIndex = errors.New("no such index")
	// ErrNotFound: no object has that key, or nothing matches (404).
	ErrNotFound = errors.New("not found")
	// ErrNotSynced: the informer has not finished its initial list (503).
	ErrNotSynced = errors.New("cache not synced yet")
	// ErrInvalid: the query itself is malformed (400).
	ErrInvalid = errors.New("invalid query")
)
