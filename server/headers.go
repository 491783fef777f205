package server

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
)

// Freshness headers, on every response.
const (
	HeaderResourceVersion = "X-Kubeindex-Resource-Version"
	HeaderSynced          = "X-Kubeindex-Synced"
	HeaderWatch           = "X-Kubeindex-Watch"
	HeaderStale           = "X-Kubeindex-Stale"
	HeaderLastEvent       = "X-Kubeindex-Last-Event"
	HeaderSimulated       = "X-Kubeindex-Simulated"
)

// Header values shared by every response. net/http copies header values
// when it writes them and nothing here appends to them (their capacity is
// their length, so an Add would copy anyway): setting one is an
// assignment, not an allocation.
var (
	valueTrue         = []string{"true"}
	valueFalse        = []string{"false"}
	valueConnected    = []string{"connected"}
	valueDisconnected = []string{"disconnected"}
)

// lengthValues hold Content-Length values by length, one per slot
// (length modulo the slots): answers of one length recur (a stored
// object's bytes, its lookup's envelope), and a shared value is an
// assignment where a fresh one was two allocations.
var lengthValues [4096]atomic.Pointer[lengthValue]

type lengthValue struct {
	n     int
	value []string
}

// contentLength is the Content-Length header value of a body of n bytes,
// shared as the values above are; safe for concurrent use.
func contentLength(n int) []string {
	slot := &lengthValues[uint(n)%uint(len(lengthValues))]
	if v := slot.Load(); v != nil && v.n == n {
		return v.value
	}
	v := &lengthValue{n: n, value: []string{strconv.Itoa(n)}}
	slot.Store(v)
	return v.value
}

func boolValue(b bool) []string {
	if b {
		return valueTrue
	}
	return valueFalse
}

// setFreshness gives c's answer a resource's freshness headers: with
// detail, its resourceVersion and last event too (see freshnessDetail).
// They are lines on its connection when the answer takes its lines from
// there (headlines.go), else in its header map.
func (s *Server) setFreshness(c echo.Context, f cache.Freshness, detail bool) {
	if lc := connOf(c.Request()); lc != nil && !c.Response().Committed {
		var rv, last, sim []byte
		if detail {
			v := s.freshnessValuesOf(f)
			rv, last = v.resourceVersionLine, v.lastEventLine
		}
		if f.Simulated {
			sim = simulatedLine
		}
		if lc.setLines(rv, last, stateLines[stateIndex(f.Synced, f.Stale, f.WatchConnected)], sim) {
			return
		}
	}
	s.setFreshnessHeader(c.Response().Header(), f, detail)
}

// freshnessValuesOf is the header values of f, shared with the answers
// before while f's resource version and last event stay the same.
func (s *Server) freshnessValuesOf(f cache.Freshness) *freshnessValues {
	v := s.fresh.Load()
	if v == nil || v.resourceVersion != f.ResourceVersion || !v.lastEvent.Equal(f.LastEvent) {
		v = newFreshnessValues(f)
		s.fresh.Store(v)
	}
	return v
}

// setFreshnessHeader is setFreshness into the header map h. The keys are
// canonical, so they are assigned directly.
func (s *Server) setFreshnessHeader(h http.Header, f cache.Freshness, detail bool) {
	if detail {
		v := s.freshnessValuesOf(f)
		if v.resourceVersionValue != nil {
			h[HeaderResourceVersion] = v.resourceVersionValue
		}
		if v.lastEventValue != nil {
			h[HeaderLastEvent] = v.lastEventValue
		}
	}
	h[HeaderSynced] = boolValue(f.Synced)
	h[HeaderStale] = boolValue(f.Stale)
	if f.WatchConnected {
		h[HeaderWatch] = valueConnected
	} else {
		h[HeaderWatch] = valueDisconnected
	}
	if f.Simulated {
		h[HeaderSimulated] = valueTrue
	}
}

// atomicFreshness holds the values of the freshness last written. A busy
// resource is answered far more often than its freshness changes, so most
// answers share them rather than format and allocate their own.
type atomicFreshness = atomic.Pointer[freshnessValues]

// freshnessValues are the header values of a resource version and a last
// event, and their header lines (headlines.go); nil when the freshness has
// none.
type freshnessValues struct {
	resourceVersion      string
	lastEvent            time.Time
	resourceVersionValue []string
	lastEventValue       []string
	resourceVersionLine  []byte
	lastEventLine        []byte
}

func newFreshnessValues(f cache.Freshness) *freshnessValues {
	v := &freshnessValues{resourceVersion: f.ResourceVersion, lastEvent: f.LastEvent}
	if f.ResourceVersion != "" {
		v.resourceVersionValue = []string{f.ResourceVersion}
		v.resourceVersionLine = appendHeaderLine(nil, HeaderResourceVersion, f.ResourceVersion)
	}
	if !f.LastEvent.IsZero() {
		v.lastEventValue = []string{f.LastEvent.UTC().Format(time.RFC3339Nano)}
		v.lastEventLine = appendHeaderLine(nil, HeaderLastEvent, v.lastEventValue[0])
	}
	return v
}

// setResourceFreshness sets the freshness of the resource an answer is
// about, from what the cache returned with the answer or its error. The
// cache returns none (the zero value: neither synced nor stale, which a
// resource always is) when there was no such resource to ask; the error
// translation then gives the answer the whole cache's. It returns whether
// the details were given (see freshnessDetail).
func (s *Server) setResourceFreshness(c echo.Context, resource string, f cache.Freshness) bool {
	if !f.Synced && !f.Stale {
		return false
	}
	detail := s.freshnessDetail(c, resource)
	s.setFreshness(c, f, detail)
	return detail
}

// freshnessDetail reports whether the caller may be told when resource last
// changed and its resourceVersion: a resource's last event and version move
// with every change in every namespace, so, when authorizing, only a
// caller who may list it cluster-wide is told them; anyone else gets
// synced, stale and the watch's state. A decision that cannot be made
// (the authorizer is down) tells nothing, and fails nothing.
func (s *Server) freshnessDetail(c echo.Context, resource string) bool {
	if !s.authorizing() {
		return true
	}
	res, err := s.r.Resolve(resource)
	if err != nil {
		return false
	}
	ok, err := s.accessFor(c).decide(auth.Attributes{Verb: auth.VerbList, Group: res.Group, Resource: res.Plural})
	return err == nil && ok
}

// fillFreshness gives a response that is not about one resource (health,
// resource lists, unknown routes, errors before a resource was found) the
// freshness of the cache as a whole, unless a handler set a resource's.
//
// An unauthenticated answer (a probe, a 401, the dashboard's files while
// authentication is on), and the 403 of a Host not served while it is off,
// carry none: when the cache last changed, and its
// resourceVersion, tell activity in namespaces the caller may not read.
// When authorizing, the whole cache's last event is given to nobody (it
// would take a review per resource to know who may see them all).
func (s *Server) fillFreshness(c echo.Context) {
	if s.authenticating() && userOf(c) == nil || c.Get(hostRefusedKey) != nil {
		return
	}
	if lc := connOf(c.Request()); lc != nil {
		if on, fresh := lc.linesFresh(); on {
			if !fresh {
				s.setFreshness(c, s.r.Freshness(), !s.authorizing())
			}
			return
		}
	}
	if h := c.Response().Header(); h[HeaderStale] == nil {
		s.setFreshnessHeader(h, s.r.Freshness(), !s.authorizing())
	}
}
