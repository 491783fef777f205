package fakeapi

import (
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// watcher is one open watch stream. Its fields other than ch and stop are
// fixed at creation; stopped is guarded by Server.mu.
type watcher struct {
	res       *resource
	namespace string // "" for all namespaces
	ls        labels.Selector
	fs        fields.Selector
	after     uint64        // events at or before this resourceVersion are not sent
	ch        chan frame    // bounded; sent to only under Server.mu
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
// a change. s.mu must be held.
func (s *Server) broadcast(ev event) {
	for w := range s.watchers {
		f, ok := w.filter(ev)
		if !ok {
			continue
		}
		select {
		case w.ch <- f:
		default:
			s.stopWatcher(w)
		}
	}
}

func (s *Server) stopAllWatchers() {
	for w := range s.watchers {
		s.stopWatcher(w)
	}
}

// stopWatcher ends w. s.mu must be held.
func (s *Server) stopWatcher(w *watcher) {
	if !w.stopped {
		w.stopped = true
		close(w.stop)
		delete(s.watchers, w)
	}
}

// openWatch registers a watcher and returns the events it must be sent
// first, atomically, so that the stream has neither gap nor duplicate: the
// retained events after the requested resourceVersion (none for "" and
// "0": from now).
func (s *Server) openWatch(w *watcher, q *query) ([]frame, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first []frame
	if q.rv != 0 {
		later, err := s.since(q.rv)
		if err != nil {
			return nil, err
		}
		for _, ev := range later {
			if f, ok := w.filter(ev); ok {
				first = append(first, f)
			}
		}
	}
	s.watchers[w] = struct{}{}
	return first, nil
}

// bookmarkRV returns the resourceVersion a bookmark may carry now: the
// current one, if every event up to it has been taken from w.ch (events
// are sent under s.mu, so an empty channel seen under s.mu means none is
// pending). ok is false while events are still queued, or once the watch
// is stopped, since events may then have been dropped.
func (s *Server) bookmarkRV(w *watcher) (rv uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv, !w.stopped && len(w.ch) == 0
}

// serveWatch streams events for one watch request until the client goes
// away, the timeout passes or the cluster closes the watch.
func (s *Server) serveWatch(rw http.ResponseWriter, req *http.Request, w *watcher, q *query) {
	out := newFrameWriter(rw)
	replay, err := s.openWatch(w, q)
	if err != nil {
		// A real API server accepts the watch, then reports 410 in-stream.
		out.start()
		out.status(statusFor(err))
		return
	}
	defer func() {
		s.mu.Lock()
		s.stopWatcher(w)
		s.mu.Unlock()
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
		t := time.NewTicker(s.opts.BookmarkInterval)
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
			if rv, ok := s.bookmarkRV(w); ok && !out.event("BOOKMARK", bookmarkObject(w.res, rv)) {
				return
			}
		}
	}
}
