package cache

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kubeindex/kubeindex/indexers"
)

// Freshness says how current the cached view of a resource is. Every
// response carries it.
type Freshness struct {
	Synced          bool   `json:"synced"`
	ResourceVersion string `json:"resourceVersion"`
	// LastEvent is when the last add, update or delete arrived (zero: none yet).
	LastEvent time.Time `json:"lastEvent,omitzero"`
	// WatchConnected is true while every informer of the resource has its
	// watch open.
	WatchConnected bool `json:"watchConnected"`
	// DisconnectedSince is set while a watch is down.
	DisconnectedSince time.Time `json:"disconnectedSince,omitzero"`
	// Stale is true when a watch has been down longer than the stale threshold
	// (or the resource never synced): answers may be out of date.
	Stale     bool   `json:"stale"`
	LastError string `json:"lastError,omitempty"`
	Simulated bool   `json:"simulated,omitempty"`
}

// Status describes one cached resource for /api/v1/resources and /readyz.
type Status struct {
	Resource
	Indexes       []indexers.Spec `json:"indexes"`
	Namespaces    []string        `json:"namespaces,omitempty"`
	LabelSelector string          `json:"labelSelector,omitempty"`
	FieldSelector string          `json:"fieldSelector,omitempty"`
	Count         int64           `json:"count"`
	WatchRestarts int64           `json:"watchRestarts"`
	Events        EventCounts     `json:"events"`
	Freshness
}

// EventCounts counts the events a resource's informers delivered.
type EventCounts struct {
	Added    int64 `json:"added"`
	Modified int64 `json:"modified"`
	Deleted  int64 `json:"deleted"`
}

// Resources returns the status of every configured resource, in
// configuration order.
func (c *Cache) Resources() []Status {
	out := make([]Status, len(c.resources))
	for i, r := range c.resources {
		out[i] = r.status()
	}
	return out
}

// ResourceStatus returns the status of one resource.
func (c *Cache) ResourceStatus(name string) (Status, error) {
	r, err := c.resource(name)
	if err != nil {
		return Status{}, err
	}
	return r.status(), nil
}

// Freshness folds every resource's freshness, for answers that are not
// about one resource: synced and connected only if all are, stale if any is,
// the latest event; there is no single resource version. Unlike Resources
// it does not count objects, so it costs nothing per object.
func (c *Cache) Freshness() Freshness {
	f := Freshness{Synced: true, WatchConnected: true, Simulated: c.opts.Simulated}
	for _, r := range c.resources {
		rf := r.freshness()
		f.Synced = f.Synced && rf.Synced
		f.WatchConnected = f.WatchConnected && rf.WatchConnected
		f.Stale = f.Stale || rf.Stale
		if rf.LastEvent.After(f.LastEvent) {
			f.LastEvent = rf.LastEvent
		}
	}
	return f
}

// Ready reports whether every resource has synced.
func (c *Cache) Ready() bool {
	for _, r := range c.resources {
		if !r.synced() {
			return false
		}
	}
	return true
}

func (r *resourceCache) synced() bool {
	if r.crdWatch != nil && !r.crdWatch.settled() {
		return false
	}
	for _, sh := range r.shards {
		if !sh.hasSynced() {
			return false
		}
	}
	return true
}

func (r *resourceCache) status() Status {
	st := Status{
		Resource:      r.res,
		Indexes:       r.spec.Indexes,
		Namespaces:    r.spec.Namespaces,
		LabelSelector: r.spec.LabelSelector,
		FieldSelector: r.spec.FieldSelector,
		Freshness:     r.freshness(),
	}
	st.Indexes = make([]indexers.Spec, len(r.spec.Indexes))
	for i, s := range r.spec.Indexes {
		st.Indexes[i] = s.Normalized() // show the inferred type, not ""
	}
	for _, sh := range r.shards {
		st.Count += sh.count()
		st.WatchRestarts += sh.conn.snapshot().Restarts
		st.Events.Added += sh.added.Load()
		st.Events.Modified += sh.modified.Load()
		st.Events.Deleted += sh.deleted.Load()
	}
	return st
}

// count is how many objects the shard holds: the adds less the deletes
// its handler has seen. The handler is called for every change the store
// takes, by the goroutine that applies it, right after it (a relist's
// vanished objects are deletes, its reappearing ones adds), so the count is
// the store's once each change has reached the handler. Counting the store
// itself means listing its keys, an n-key slice per call, and readiness
// probes ask continually.
func (sh *shard) count() int64 {
	return sh.added.Load() - sh.deleted.Load()
}

// freshness folds the shards: connected only if all are, the latest event,
// the highest resource version, the longest outage, the longest silence.
//
// Answers are stale when a watch has been down longer than StaleAfter, or
// when nothing (no event, no bookmark, no answer to a watch or list) came
// for longer than WatchIdleTimeout: a connection whose bytes stopped while
// its socket stays open never reports an error, and the API server's
// bookmarks, about one a minute on every watch, are what tells a quiet
// cluster from a hung connection.
func (r *resourceCache) freshness() Freshness {
	f := Freshness{Synced: r.synced(), WatchConnected: true, Simulated: r.opts.Simulated}
	now := r.opts.Now()
	var silence time.Duration
	for _, sh := range r.shards {
		rv := sh.informer.LastSyncResourceVersion()
		if newerRV(rv, f.ResourceVersion) {
			f.ResourceVersion = rv
		}
		if ns := sh.lastEvent.Load(); ns != 0 {
			if t := time.Unix(0, ns); t.After(f.LastEvent) {
				f.LastEvent = t
			}
		}
		cs := sh.conn.snapshot()
		silence = max(silence, now.Sub(cs.LastHeard))
		if cs.LastError != "" {
			f.LastError = cs.LastError
		}
		if !cs.Connected {
			f.WatchConnected = false
			if f.DisconnectedSince.IsZero() || cs.Since.Before(f.DisconnectedSince) {
				f.DisconnectedSince = cs.Since
			}
		}
	}
	if f.WatchConnected {
		f.LastError = ""
	}
	silent := silence > r.opts.WatchIdleTimeout
	if silent && f.LastError == "" {
		f.LastError = fmt.Sprintf("nothing received from the API server for %s, not even a bookmark: connection presumed hung",
			silence.Round(time.Second))
	}
	f.Stale = !f.Synced || silent || (!f.WatchConnected && now.Sub(f.DisconnectedSince) > r.opts.StaleAfter)
	return f
}

// newerRV compares resource versions numerically when both are numbers (as
// they are from etcd); they are otherwise opaque, and the first one wins.
func newerRV(a, b string) bool {
	if b == "" {
		return a != ""
	}
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}
