package server

// Bounds the server applies that no option sets, exported under names the
// configuration reference (docs/configuration.md, generated from them by
// make docs) can read. Each is the constant the code applies.
const (
	// MaxQueryParamBytes bounds one query parameter's value.
	MaxQueryParamBytes = maxParamBytes
	// MaxErrorMessageBytes bounds an error's message.
	MaxErrorMessageBytes = maxMessageBytes
	// MaxBatchBody and MaxBatchQueries bound a batch of IP lookups.
	MaxBatchBody    = maxBatchBody
	MaxBatchQueries = maxBatchQueries
	// MaxPageSize bounds one page of a list (limit=).
	MaxPageSize = maxLimit
)
