package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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

// configCollector exports a ConfigReporter's status as metrics, as
// Prometheus does its own configuration's reloads.
type configCollector struct{ r ConfigReporter }

var (
	descConfigSuccess = prometheus.NewDesc("kubeindex_config_last_reload_successful",
		"Whether the configuration file as it is now serves (1), or was refused and the clusters serve on as last applied (0).", nil, nil)
	descConfigReloads = prometheus.NewDesc("kubeindex_config_reloads_total",
		"Changes of the configuration file applied without a restart.", nil, nil)
)

func (cc configCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descConfigSuccess
	ch <- descConfigReloads
}

func (cc configCollector) Collect(ch chan<- prometheus.Metric) {
	st := cc.r.ConfigStatus()
	ok := 1.0
	if st.Error != "" {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(descConfigSuccess, prometheus.GaugeValue, ok)
	ch <- prometheus.MustNewConstMetric(descConfigReloads, prometheus.CounterValue, float64(st.Reloads))
}
