package server

import "time"

// ConfigStatus is how a fleet's configuration file was last read. GET
// /api/v1/clusters reports it as "configuration" when the fleet is a
// ConfigReporter.
type ConfigStatus struct {
	// File is the configuration file; "" when the clusters come from flags.
	File string `json:"file,omitempty"`
	// Watched tells whether a change of the file is applied while
	// serving, without a restart.
	Watched bool `json:"watched"`
	// AppliedAt is when the configuration serving now was read; Reloads
	// how many changes of the file were applied since the start.
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	Reloads   int       `json:"reloads"`
	// Error is why the file as it is now was refused, the clusters
	// serving on as last applied; "" when its last reading was applied.
	Error    string    `json:"error,omitempty"`
	FailedAt time.Time `json:"failedAt,omitzero"`
}

// ConfigReporter is a Clusters whose configuration is read from a file:
// GET /api/v1/clusters says how the last reading went.
type ConfigReporter interface {
	ConfigStatus() ConfigStatus
}
