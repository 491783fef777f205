package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kubeindex/kubeindex/cache"
)

// metrics owns a private registry: nothing registers globally, so several
// servers (tests) never collide.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// delivery times live stream events from their publication to the end
	// of the write that carried them, by transport.
	delivery                *prometheus.HistogramVec
	deliveryWS, deliverySSE prometheus.Observer
	deliveryKube            prometheus.Observer // the Kubernetes API's watches
	// unmatched counts the requests that matched no route.
	unmatched *routeMetrics
}

func newMetrics(r Reader) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeindex_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kubeindex_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern (streams excluded).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"route"}),
		delivery: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeindex_stream_delivery_seconds",
			Help: "Seconds from an event's publication to the end of the write that carried it to a subscriber, " +
				"by transport (websocket covers per-resource and multiplexed sockets). Live events only: " +
				"snapshots and events replayed on resume are not counted.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"transport"}),
	}
	m.unmatched = m.forRoute("unmatched")
	m.deliveryWS = m.delivery.WithLabelValues("websocket")
	m.deliverySSE = m.delivery.WithLabelValues("sse")
	m.deliveryKube = m.delivery.WithLabelValues("kubernetes")
	m.registry.MustRegister(m.requests, m.latency, m.delivery, &cacheCollector{r: r},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// routeMetrics holds a route's series, resolved once instead of by label
// values on every request. They are created on first use, so that
// /metrics lists only what was answered.
type routeMetrics struct {
	route string

	latencyOnce sync.Once
	latency     prometheus.Observer
	okOnce      sync.Once
	ok          prometheus.Counter // GET answered 200
}

func (m *metrics) forRoute(route string) *routeMetrics { return &routeMetrics{route: route} }

// observe counts a request under its route pattern (never the raw path:
// that would make one series per pod name). A stream's duration is the
// life of a subscription, not a latency: it is not sampled.
func (m *metrics) observe(c echo.Context, rt *route, stream bool, start time.Time, err error) {
	rm := rt.metrics
	code := c.Response().Status
	if err != nil {
		code = int(errorStatus(err).Code)
	}
	if rm == nil {
		rm = m.unmatched // no route: echo's 404 or 405
	}
	if method := c.Request().Method; code == http.StatusOK && method == http.MethodGet {
		rm.okOnce.Do(func() { rm.ok = m.requests.WithLabelValues(rm.route, method, "200") })
		rm.ok.Inc()
	} else {
		m.requests.WithLabelValues(rm.route, method, strconv.Itoa(code)).Inc()
	}
	if !stream {
		rm.latencyOnce.Do(func() { rm.latency = m.latency.WithLabelValues(rm.route) })
		rm.latency.Observe(time.Since(start).Seconds())
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// cacheCollector reads the cache's own bookkeeping at scrape time, so the
// cache package needs no Prometheus dependency and the hot paths pay nothing.
type cacheCollector struct{ r Reader }

var (
	descObjects   = prometheus.NewDesc("kubeindex_objects", "Objects cached per resource.", []string{"resource"}, nil)
	descSynced    = prometheus.NewDesc("kubeindex_synced", "1 once the resource's informers have synced.", []string{"resource"}, nil)
	descConnected = prometheus.NewDesc("kubeindex_watch_connected", "1 while every watch of the resource is open.", []string{"resource"}, nil)
	descStale     = prometheus.NewDesc("kubeindex_stale", "1 while answers for the resource are stale.", []string{"resource"}, nil)
	descRestarts  = prometheus.NewDesc("kubeindex_watch_starts_total", "Watches opened per resource (restarts included).", []string{"resource"}, nil)
	descSince     = prometheus.NewDesc("kubeindex_seconds_since_last_event", "Seconds since the last add, update or delete; absent before the first.", []string{"resource"}, nil)
	descEvents    = prometheus.NewDesc("kubeindex_events_total", "Events received per resource and type.", []string{"resource", "type"}, nil)

	descSubscribers = prometheus.NewDesc("kubeindex_stream_subscribers",
		"Open stream subscriptions per resource (WebSocket, multiplexed and event-stream alike).", []string{"resource"}, nil)
	descQueuedEvents = prometheus.NewDesc("kubeindex_stream_queued_events",
		"Events waiting in the resource's subscriber queues for their consumers to take them.", []string{"resource"}, nil)
	descQueuedBytes = prometheus.NewDesc("kubeindex_stream_queued_bytes",
		"Size of the objects of the events waiting in the resource's subscriber queues (an object waiting for two subscribers counts twice).",
		[]string{"resource"}, nil)
	descResyncs = prometheus.NewDesc("kubeindex_stream_resyncs_total",
		"Subscriptions ended with RESYNC_REQUIRED because they fell too far behind (their queue overflowed).", []string{"resource"}, nil)

	descOrdered = prometheus.NewDesc("kubeindex_ordered_indexes",
		"Ordered indexes built and kept per resource: asked (built by a question) or standing (built after the sync).", []string{"resource", "kind"}, nil)
	descStandingPending = prometheus.NewDesc("kubeindex_standing_indexes_pending",
		"Standing ordered indexes the column warmer has yet to build (after its first pass over the resource): 0 once the cache has settled after its sync.",
		[]string{"resource"}, nil)

	descIPAddresses = prometheus.NewDesc("kubeindex_ip_history_addresses", "Addresses the IP ownership history holds intervals for.", nil, nil)
	descIPIntervals = prometheus.NewDesc("kubeindex_ip_history_intervals", "Ownership intervals the IP history holds (open and closed).", nil, nil)
	descIPOpen      = prometheus.NewDesc("kubeindex_ip_history_open_intervals", "Ownership intervals still open: addresses held now.", nil, nil)
	descIPEvicted   = prometheus.NewDesc("kubeindex_ip_history_evicted_total", "Intervals dropped from the IP history, by why: retention (--ip-history) or cap (--ip-history-max).", []string{"reason"}, nil)
	descIPWriteErr  = prometheus.NewDesc("kubeindex_ip_history_write_errors_total", "Failed writes of the IP history to --ip-history-dir.", nil, nil)
	descIPSince     = prometheus.NewDesc("kubeindex_ip_history_since_seconds", "Unix time of the earliest moment the IP history answers for.", nil, nil)
)

func (cc *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descObjects, descSynced, descConnected, descStale, descRestarts, descSince, descEvents,
		descIPAddresses, descIPIntervals, descIPOpen, descIPEvicted, descIPSince, descIPWriteErr,
		descSubscribers, descQueuedEvents, descQueuedBytes, descResyncs, descOrdered, descStandingPending} {
		ch <- d
	}
}

func (cc *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, st := range cc.r.Resources() {
		ch <- prometheus.MustNewConstMetric(descObjects, prometheus.GaugeValue, float64(st.Count), st.Name)
		ch <- prometheus.MustNewConstMetric(descSynced, prometheus.GaugeValue, boolFloat(st.Synced), st.Name)
		ch <- prometheus.MustNewConstMetric(descConnected, prometheus.GaugeValue, boolFloat(st.WatchConnected), st.Name)
		ch <- prometheus.MustNewConstMetric(descStale, prometheus.GaugeValue, boolFloat(st.Stale), st.Name)
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(st.WatchRestarts), st.Name)
		if !st.LastEvent.IsZero() {
			ch <- prometheus.MustNewConstMetric(descSince, prometheus.GaugeValue, now.Sub(st.LastEvent).Seconds(), st.Name)
		}
		for typ, n := range map[cache.EventType]int64{cache.Added: st.Events.Added, cache.Modified: st.Events.Modified, cache.Deleted: st.Events.Deleted} {
			ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(n), st.Name, string(typ))
		}
	}
	for _, st := range cc.r.StreamStats() {
		ch <- prometheus.MustNewConstMetric(descSubscribers, prometheus.GaugeValue, float64(st.Subscribers), st.Resource)
		ch <- prometheus.MustNewConstMetric(descQueuedEvents, prometheus.GaugeValue, float64(st.QueuedEvents), st.Resource)
		ch <- prometheus.MustNewConstMetric(descQueuedBytes, prometheus.GaugeValue, float64(st.QueuedBytes), st.Resource)
		ch <- prometheus.MustNewConstMetric(descResyncs, prometheus.CounterValue, float64(st.Dropped), st.Resource)
	}
	for _, st := range cc.r.OrderStats() {
		ch <- prometheus.MustNewConstMetric(descOrdered, prometheus.GaugeValue, float64(st.Asked), st.Resource, "asked")
		ch <- prometheus.MustNewConstMetric(descOrdered, prometheus.GaugeValue, float64(st.Standing), st.Resource, "standing")
		ch <- prometheus.MustNewConstMetric(descStandingPending, prometheus.GaugeValue, float64(st.StandingPending), st.Resource)
	}
	if h, ok := cc.r.IPHistoryStats(); ok {
		ch <- prometheus.MustNewConstMetric(descIPAddresses, prometheus.GaugeValue, float64(h.Addresses))
		ch <- prometheus.MustNewConstMetric(descIPIntervals, prometheus.GaugeValue, float64(h.Intervals))
		ch <- prometheus.MustNewConstMetric(descIPOpen, prometheus.GaugeValue, float64(h.Open))
		ch <- prometheus.MustNewConstMetric(descIPEvicted, prometheus.CounterValue, float64(h.Evicted-h.EvictedByCap), "retention")
		ch <- prometheus.MustNewConstMetric(descIPEvicted, prometheus.CounterValue, float64(h.EvictedByCap), "cap")
		ch <- prometheus.MustNewConstMetric(descIPSince, prometheus.GaugeValue, float64(h.Since.UnixNano())/1e9)
		ch <- prometheus.MustNewConstMetric(descIPWriteErr, prometheus.CounterValue, float64(h.WriteErrors))
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// deliveryTimer times the live events of one stream: add notes an event's
// publication as it joins a batch, written observes every noted event once
// the batch is out. Not safe for concurrent use; the zero value (no
// observer) times nothing.
type deliveryTimer struct {
	obs     prometheus.Observer
	pending []time.Time
}

// maxKeptPending bounds the notes an idle stream keeps room for: a batch
// of many events (a burst, a small object kind) leaves no large slice
// behind on a socket that then goes quiet.
const maxKeptPending = 8

func (d *deliveryTimer) add(m *cache.Message) {
	if d.obs == nil {
		return
	}
	if at, ok := m.Published(); ok {
		d.pending = append(d.pending, at)
	}
}

// written observes the noted events as delivered now.
func (d *deliveryTimer) written() {
	if len(d.pending) == 0 {
		return
	}
	now := time.Now()
	for _, at := range d.pending {
		d.obs.Observe(now.Sub(at).Seconds())
	}
	if cap(d.pending) > maxKeptPending {
		d.pending = nil
	} else {
		d.pending = d.pending[:0]
	}
}

// dropped forgets the noted events: their batch was not written.
func (d *deliveryTimer) dropped() { d.pending = d.pending[:0] }
