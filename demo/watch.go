package demo

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// watcher is one open watch stream. Its fields other than ch and stop are
// fixed at creation; stopped is guarded by Cluster.mu.
type watcher struct {
	res       *resource
	namespace string // "" for all namespaces
	ls        labels.Selector
	fs        fields.Selector
	after     uint64        // events at or before this resourceVersion are not sent
	ch        chan frame    // bounded; sent to only under Cluster.mu
	stop      chan struct{} // closed when the cluster ends the watch
	stopped   bool
}

// frame is one event as a watcher sends it; raw is the event's object.
type frame struct {
	typ string
	raw []byte
}

// filter turns a cluster event into what this watcher sees, the way the
// API server's watch cache does: an object that stops matching the
// selectors is DELETED for this watcher, one that starts matching is ADDED.
func (w *watcher) filter(ev event) (frame, bool) {
	if ev.obj.res != w.res || ev.obj.rv <= w.after || (w.namespace != "" && ev.obj.namespace != w.namespace) {
		return frame{}, false
	}
	now := ev.typ != "DELETED" && ev.obj.matches(w.ls, w.fs)
	before := ev.old.matches(w.ls, w.fs)
	switch {
	case ev.typ == "DELETED":
		return frame{"DELETED", ev.obj.full}, before
	case now && before:
		return frame{"MODIFIED", ev.obj.full}, true
	case now:
		return frame{"ADDED", ev.obj.full}, true
	case before:
		last, err := withResourceVersion(ev.old, ev.obj.rv)
		if err != nil {
			return frame{}, false
		}
		return frame{"DELETED", last.full}, true
	}
	return frame{}, false
}

// broadcast hands ev to every interested watcher without blocking: a
// watcher whose buffer is full is closed, so a slow client never holds up
// a change. c.mu must be held.
func (c *Cluster) broadcast(ev event) {
	for w := range c.watchers {
		f, ok := w.filter(ev)
		if !ok {
			continue
		}
		select {
		case w.ch <- f:
		default:
			c.stopWatcher(w)
		}
	}
}

// DropWatches closes every open watch stream, as a dropped connection
// would. Clients re-watch from their last resourceVersion.
func (c *Cluster) DropWatches() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopAllWatchers()
}

func (c *Cluster) stopAllWatchers() {
	for w := range c.watchers {
		c.stopWatcher(w)
	}
}

// stopWatcher ends w. c.mu must be held.
func (c *Cluster) stopWatcher(w *watcher) {
	if !w.stopped {
		w.stopped = true
		close(w.stop)
		delete(c.watchers, w)
	}
}

// openWatch registers a watcher and returns the events it must be sent
// first, atomically, so that the stream has neither gap nor duplicate:
// with sendInitialEvents, the current objects as ADDED and a bookmark
// marking their end (the "watch-list" protocol client-go uses by
// default); else the retained events after the requested resourceVersion
// (none for "" and "0": from now).
func (c *Cluster) openWatch(w *watcher, q *query) ([]frame, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first []frame
	switch {
	case q.initialEvents:
		for _, o := range c.sorted(c.objects[w.res.plural]) {
			if (w.namespace == "" || o.namespace == w.namespace) && o.matches(w.ls, w.fs) {
				first = append(first, frame{"ADDED", o.full})
			}
		}
		first = append(first, frame{"BOOKMARK", fmt.Appendf(nil,
			`{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d","annotations":{"k8s.io/initial-events-end":"true"}}}`,
			w.res.kind, w.res.apiVersion(), c.rv)})
	case q.rv != 0:
		later, err := c.since(q.rv)
		if err != nil {
			return nil, err
		}
		for _, ev := range later {
			if f, ok := w.filter(ev); ok {
				first = append(first, f)
			}
		}
	}
	c.watchers[w] = struct{}{}
	return first, nil
}

// bookmarkRV returns the resourceVersion a bookmark may carry now: the
// current one, if every event up to it has been taken from w.ch (events
// are sent under c.mu, so an empty channel seen under c.mu means none is
// pending). ok is false while events are still queued, or once the watch
// is stopped, since events may then have been dropped.
func (c *Cluster) bookmarkRV(w *watcher) (rv uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rv, !w.stopped && len(w.ch) == 0
}

// serveWatch streams events for one watch request until the client goes
// away, the timeout passes or the cluster closes the watch.
func (c *Cluster) serveWatch(rw http.ResponseWriter, req *http.Request, w *watcher, q *query) {
	out := newFrameWriter(rw)
	replay, err := c.openWatch(w, q)
	if err != nil {
		// A real API server accepts the watch, then reports 410 in-stream.
		out.start()
		out.status(statusFor(err))
		return
	}
	defer func() {
		c.mu.Lock()
		c.stopWatcher(w)
		c.mu.Unlock()
	}()
	out.start()
	for _, f := range replay {
		if !out.event(f.typ, f.raw) {
			return
		}
	}
	var timeout, bookmarks <-chan time.Time
	if q.timeout > 0 {
		t := time.NewTimer(q.timeout)
		defer t.Stop()
		timeout = t.C
	}
	if q.bookmarks {
		t := time.NewTicker(c.opts.BookmarkInterval)
		defer t.Stop()
		bookmarks = t.C
	}
	for {
		select {
		case <-req.Context().Done():
			return
		case <-w.stop:
			return
		case <-timeout:
			return
		case f := <-w.ch:
			if !out.event(f.typ, f.raw) {
				return
			}
		case <-bookmarks:
			if rv, ok := c.bookmarkRV(w); ok && !out.event("BOOKMARK", bookmarkObject(w.res, rv)) {
				return
			}
		}
	}
}
