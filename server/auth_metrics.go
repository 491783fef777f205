package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubeindex/kubeindex/auth"
)

// securityCollector reads authentication, authorization and limit counters
// at scrape time.
type securityCollector struct{ s *Server }

var (
	descAuthDecisions = prometheus.NewDesc("kubeindex_auth_decisions_total",
		"Authentication and authorization decisions by result (allowed, denied, error: no decision could be made).",
		[]string{"stage", "result"}, nil)
	descAuthCache = prometheus.NewDesc("kubeindex_auth_cache_total",
		"Authentication and authorization answers by source: hit (cache), miss (a review was made), stale (an expired answer used while reviews fail).",
		[]string{"stage", "result"}, nil)
	descOpenConns = prometheus.NewDesc("kubeindex_open_connections", "Open client TCP connections, streams included.", nil, nil)
	descRefused   = prometheus.NewDesc("kubeindex_refused_total",
		"Connections refused beyond the connection limit (connection) or the per-address limit (connection_per_address), and streams beyond the per-client limit.", []string{"what"}, nil)
	descReclaimed = prometheus.NewDesc("kubeindex_reclaimed_connections_total",
		"Idle connections closed to make room for a new one at the connection limit.", nil, nil)
)

func (sc *securityCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAuthDecisions, descAuthCache, descOpenConns, descRefused, descReclaimed} {
		ch <- d
	}
}

func (sc *securityCollector) Collect(ch chan<- prometheus.Metric) {
	sc.collectAuth(ch, "authentication", sc.s.opts.Auth.Authenticator)
	sc.collectAuth(ch, "authorization", sc.s.opts.Auth.Authorizer)
	conns, refusedConns, refusedAddrConns, refusedStreams := sc.s.limits.allCounts()
	ch <- prometheus.MustNewConstMetric(descOpenConns, prometheus.GaugeValue, float64(conns))
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(refusedConns), "connection")
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(refusedAddrConns), "connection_per_address")
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(refusedStreams), "stream")
	ch <- prometheus.MustNewConstMetric(descReclaimed, prometheus.CounterValue, float64(sc.s.limits.reclaimed()))
}

func (sc *securityCollector) collectAuth(ch chan<- prometheus.Metric, stage string, x any) {
	r, ok := x.(auth.StatsReporter)
	if !ok {
		return
	}
	st := r.Stats()
	for result, n := range map[string]uint64{"allowed": st.Allowed, "denied": st.Denied, "error": st.Errors} {
		ch <- prometheus.MustNewConstMetric(descAuthDecisions, prometheus.CounterValue, float64(n), stage, result)
	}
	for result, n := range map[string]uint64{"hit": st.CacheHits, "miss": st.CacheMisses, "stale": st.StaleHits} {
		ch <- prometheus.MustNewConstMetric(descAuthCache, prometheus.CounterValue, float64(n), stage, result)
	}
}
