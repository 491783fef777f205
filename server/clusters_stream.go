package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// Streams across clusters (docs/streams.md, "Across clusters"): on a
// fleet's front, one subscription is a part per cluster, each that
// cluster's own subscription, opened and authorized by its own server as
// under its prefix. Every message names its cluster beside the message,
// never inside the object ({"cluster":…,"type":…,"object":…}), and every
// message after a cluster's snapshot carries the stream's resume token
// (fleetPositions): each cluster's own position. A cluster's
// RESYNC_REQUIRED ends only its part: the token forgets its position and
// the part opens again with a snapshot (after its backoff when its client
// fell behind: clusters_stream_backoff.go). A part that comes back from
// its position (its server was retired, then served again) continues
// where it was: its cluster's SYNCED was sent once in this stream, so the
// SYNCED that ends the replay goes out as that cluster's BOOKMARK. A
// cluster's change of state (stale, failed, back, removed, added to a
// stream of every cluster) is a CLUSTER message.

// ClusterMessage is the type of the message that says how a cluster
// takes part in a stream across clusters.
const ClusterMessage cache.MessageType = "CLUSTER"

// The states of a CLUSTER message besides ClusterState's: removed, the
// cluster left the configuration (or the stream's scope) and its part
// ended.
const ClusterRemoved = "removed"

// partOpener opens a cluster's part of a stream, authorized as the caller
// under that cluster's prefix, resuming after from ("" for the stream's
// start, snapshot saying whether it starts with one). notify is the
// stream's wake-up. It may block (reviews, a resume's wait).
type partOpener func(cs *Server, name, from string, snapshot bool, notify chan<- struct{}) (cache.Subscription, error)

// fleetPart is one cluster's part of a stream across clusters.
type fleetPart struct {
	name    string
	cs      *Server            // the server it was opened on; nil when not serving
	sub     cache.Subscription // nil while opening or not streaming
	status  int                // 200 streaming; 403, 404: out for good; 503: waits to serve again
	state   string             // last state reported
	opening uint64             // >0: an open of this generation is under way
	gen     uint64
	retired atomic.Bool // its server was retired
	unwatch func() bool // stops the retirement watch
	tag     []byte      // idTag then `"cluster":"…",`

	// synced: the cluster's SYNCED was sent in this stream since its last
	// RESYNC_REQUIRED (or RESET); held: some of its messages were, so the
	// client may hold its objects.
	synced, held bool
	backoff      partBackoff
	retryAt      time.Time   // not opened again before; zero: no wait
	stopTimer    func() bool // the wake-up at retryAt
}

// partResult is an open's outcome, handed from its goroutine.
type partResult struct {
	part *fleetPart
	gen  uint64
	cs   *Server
	sub  cache.Subscription
	err  error
}

// fleetStream is a subscription across clusters. Its methods other than
// adopt's goroutines and close are called by one goroutine, its
// consumer (the SSE pump, the WebSocket writer).
type fleetStream struct {
	front    *Server
	kind     string // the resource, or cache.AddressStream
	follow   bool   // every cluster: follows the configuration
	open     partOpener
	wake     chan struct{}
	idTag    []byte // `{"id":"…",` on the multiplexed socket, else `{`
	snapshot bool   // whether a part that starts afresh starts with a snapshot
	clock    streamClock

	mu     sync.Mutex // guards opened and closed
	opened []partResult
	closed bool

	parts   []*fleetPart
	pos     map[string]string // the token's positions
	token   string            // pos encoded; "" when it must be again
	control [][]byte          // CLUSTER messages to send first
	next    int               // round-robin
	seen    uint64            // the state watch's generation reconciled
	dirty   bool              // a part was adopted: follow every part's state again

	retryDue atomic.Bool // a part's backoff is over (set by its timer)
}

// newFleetStream builds a stream over the clusters named, from the
// positions of a token (nil: the start), adopting the parts opened
// already (initial, in the order of names).
func (f *Server) newFleetStream(kind string, names []string, follow bool, from map[string]string, snapshot bool,
	open partOpener, wake chan struct{}, id string, initial []partResult) *fleetStream {
	fs := &fleetStream{front: f, kind: kind, follow: follow, open: open, wake: wake, snapshot: snapshot,
		pos: map[string]string{}, idTag: []byte("{"), clock: realClock}
	if id != "" {
		fs.idTag = append(jsonscan.AppendString([]byte(`{"id":`), id), ',')
	}
	for name, p := range from {
		if slices.Contains(names, name) {
			fs.pos[name] = p
		}
	}
	f.fleetStates.subscribe(f, wake) // seen 0: the first reconcile reports each state
	for i, name := range names {
		p := fs.newPart(name)
		r := initial[i]
		r.part, r.gen = p, p.gen
		fs.adopt(r)
	}
	return fs
}

func (fs *fleetStream) newPart(name string) *fleetPart {
	p := &fleetPart{name: name, tag: jsonscan.AppendString(append(append([]byte(nil), fs.idTag...), `"cluster":`...), name)}
	p.tag = append(p.tag, ',')
	fs.parts = append(fs.parts, p)
	return p
}

// startOpen opens p's part on its own goroutine: a review or a resume's
// wait in one cluster holds up no other. from is the position to resume
// after, "" to start afresh: a client that may hold some of the
// cluster's objects (a part ended inside its snapshot) is told to drop
// them first.
func (fs *fleetStream) startOpen(p *fleetPart, cs *Server, from string) {
	fs.stopRetry(p)
	if from == "" && p.held {
		fs.control = append(fs.control, fs.resyncMessage(p, fmt.Sprintf("cluster %q's part of this stream starts again with a snapshot", p.name)))
		p.held, p.synced = false, false
	}
	p.gen++
	p.opening = p.gen
	gen := p.gen
	go func() {
		sub, err := fs.open(cs, p.name, from, fs.snapshot, fs.wake)
		fs.mu.Lock()
		if fs.closed {
			fs.mu.Unlock()
			if sub != nil {
				cs.streams.unsubscribe(sub)
			}
			return
		}
		fs.opened = append(fs.opened, partResult{part: p, gen: gen, cs: cs, sub: sub, err: err})
		fs.mu.Unlock()
		signal(fs.wake)
	}()
}

// adopt takes an open's outcome into its part: a subscription to read, or
// the status the cluster answered, reported once as a CLUSTER message.
func (fs *fleetStream) adopt(r partResult) {
	p := r.part
	if r.gen != p.gen || !slices.Contains(fs.parts, p) {
		if r.sub != nil { // superseded, or the part left
			r.cs.streams.unsubscribe(r.sub)
		}
		return
	}
	p.opening = 0
	if r.err != nil {
		st := errorStatus(r.err)
		p.status, p.cs = int(st.Code), r.cs
		reason := st.Message
		if st.Code == http.StatusForbidden {
			reason = "" // says nothing more of what is there
		}
		state, wait := "", time.Duration(0)
		switch st.Code {
		case http.StatusServiceUnavailable, http.StatusTooManyRequests:
			// Not serving, or its access reviews did not answer in time:
			// tried again after the part's backoff.
			state, wait = fs.stateOf(p.name), fs.retryLater(p, true)
		}
		fs.report(p, state, reason, wait)
		return
	}
	p.sub, p.cs, p.status = r.sub, r.cs, http.StatusOK
	p.retired.Store(false)
	p.unwatch = context.AfterFunc(r.cs.retired, func() { p.retired.Store(true); signal(fs.wake) })
	fs.dirty = true // say it is back
}

// stateOf is cluster name's state as last read, failed when it is not
// listed.
func (fs *fleetStream) stateOf(name string) string {
	states, _ := fs.front.fleetStates.current()
	for _, st := range states {
		if st.Name == name {
			return st.State
		}
	}
	return ClusterFailed
}

// report queues a CLUSTER message for p, unless its state and status
// were reported last; wait > 0 says when the part is opened again.
func (fs *fleetStream) report(p *fleetPart, state, reason string, wait time.Duration) {
	if p.state == state+"\x00"+strconv.Itoa(p.status) {
		return
	}
	fs.reportNow(p, state, reason, wait)
}

// reportNow queues a CLUSTER message for p, said or not before.
func (fs *fleetStream) reportNow(p *fleetPart, state, reason string, wait time.Duration) {
	p.state = state + "\x00" + strconv.Itoa(p.status)
	b := append(append([]byte(nil), p.tag...), `"type":"`...)
	b = append(b, ClusterMessage...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(p.status), 10)
	if state != "" {
		b = jsonscan.AppendString(append(b, `,"state":`...), state)
	}
	if reason != "" {
		b = jsonscan.AppendString(append(b, `,"reason":`...), reason)
	}
	b = appendRetryAfter(b, wait)
	fs.control = append(fs.control, append(b, '}'))
}

// fleetItem is one message of a stream across clusters: a whole message
// (raw), or a cluster's message m spliced behind tag.
type fleetItem struct {
	raw    []byte
	typ    cache.MessageType // raw's
	m      cache.Message
	tag    []byte
	resume string // the token after this message; "" inside a snapshot
}

// nextItem returns the next message to write, round-robin over the
// clusters; false when there is none yet. It adopts what has been
// opened and follows the clusters' states first.
func (fs *fleetStream) nextItem() (fleetItem, bool) {
	fs.mu.Lock()
	opened := fs.opened
	fs.opened = nil
	fs.mu.Unlock()
	for _, r := range opened {
		fs.adopt(r)
	}
	fs.reconcile()
	if len(fs.control) > 0 {
		b := fs.control[0]
		fs.control = fs.control[1:]
		return fleetItem{raw: b, typ: ClusterMessage}, true
	}
	for range len(fs.parts) {
		p := fs.parts[fs.next%len(fs.parts)]
		if p.sub == nil {
			fs.next++
			continue
		}
		m, ok := p.sub.Next()
		fs.next++ // one message a cluster in turn: a busy one starves no other
		if !ok {
			continue
		}
		return fs.item(p, m), true
	}
	return fleetItem{}, false
}

// item tags a cluster's message with its cluster and, once the message
// has a position, the stream's token. A cluster's RESYNC_REQUIRED ends its
// part only: the token forgets its position and the part opens again.
func (fs *fleetStream) item(p *fleetPart, m cache.Message) fleetItem {
	switch m.Type {
	case cache.Synced:
		if p.synced { // the end of a resume's replay: the client is synced already
			m = cache.Message{Type: cache.Bookmark, ResourceVersion: m.ResourceVersion}
		}
		p.synced = true
	case cache.Reset: // the address stream's: drop the cluster's addresses, a snapshot follows
		p.synced = false
	}
	p.held = true
	switch {
	case m.Terminal():
		_, expired := p.sub.Expired()
		fs.endSub(p)
		delete(fs.pos, p.name)
		fs.token = ""
		p.synced, p.held = false, false
		switch {
		case p.cs == nil:
		case expired: // its position was forgotten: nothing the client did
			fs.startOpen(p, p.cs, "")
		default: // it fell behind
			fs.overflowed(p, m.Reason)
		}
	case !m.Snapshot() && m.ResourceVersion != "":
		if fs.pos[p.name] != m.ResourceVersion {
			fs.pos[p.name] = m.ResourceVersion
			fs.token = ""
		}
	default:
		return fleetItem{m: m, tag: p.tag}
	}
	tok := fs.resume()
	tag := append(append([]byte(nil), p.tag...), `"resume":`...)
	tag = append(jsonscan.AppendString(tag, tok), ',')
	return fleetItem{m: m, tag: tag, resume: tok}
}

// resume is the token of the positions now.
func (fs *fleetStream) resume() string {
	if fs.token == "" {
		fs.token = encodeFleetPositions(fs.kind, fs.pos)
	}
	return fs.token
}

func (fs *fleetStream) endSub(p *fleetPart) {
	if p.sub != nil {
		p.cs.streams.unsubscribe(p.sub)
		p.sub = nil
	}
	if p.unwatch != nil {
		p.unwatch()
		p.unwatch = nil
	}
}

// reconcile follows the clusters: a part whose server was retired
// reports why and waits; a cluster serving again is opened again from
// its position; a stream of every cluster takes in a cluster added and
// lets a removed one go; a change of a cluster's state (stale, failed,
// synced) is reported.
func (fs *fleetStream) reconcile() {
	force := false
	for _, p := range fs.parts {
		if p.sub != nil && p.retired.Load() {
			why := p.cs.retiredWhy()
			fs.endSub(p)
			p.status = http.StatusServiceUnavailable
			fs.report(p, ClusterFailed, errorStatus(why).Message, 0)
			force = true // its successor may be serving already
		}
	}
	states, gen := fs.front.fleetStates.current()
	if gen == fs.seen && !force && !fs.dirty && !fs.retryDue.Swap(false) {
		return
	}
	fs.seen, fs.dirty = gen, false
	byName := map[string]ClusterState{}
	for _, st := range states {
		byName[st.Name] = st
	}
	for i := 0; i < len(fs.parts); i++ {
		p := fs.parts[i]
		if _, ok := byName[p.name]; !ok {
			fs.endSub(p)
			fs.stopRetry(p)
			p.gen++ // an open under way is dropped when it ends
			p.status = http.StatusNotFound
			fs.report(p, ClusterRemoved, "removed from the configuration", 0)
			delete(fs.pos, p.name)
			fs.token = ""
			fs.parts = slices.Delete(fs.parts, i, i+1)
			i--
		}
	}
	for _, st := range states {
		i := slices.IndexFunc(fs.parts, func(p *fleetPart) bool { return p.name == st.Name })
		if i < 0 {
			if !fs.follow {
				continue
			}
			fs.newPart(st.Name)
			i = len(fs.parts) - 1
			fs.parts[i].status = http.StatusServiceUnavailable
		}
		fs.follow1(fs.parts[i], st)
	}
}

// follow1 brings one part in line with its cluster's state.
func (fs *fleetStream) follow1(p *fleetPart, st ClusterState) {
	switch p.status {
	case http.StatusForbidden, http.StatusNotFound, http.StatusBadRequest:
		return // out of this stream for good, said once
	}
	serving := st.State == ClusterSynced || st.State == ClusterStale
	if p.sub != nil {
		p.status = http.StatusOK
		fs.report(p, st.State, st.Reason, 0)
		return
	}
	if !serving || p.opening != 0 {
		if !serving {
			p.status = http.StatusServiceUnavailable
			fs.report(p, st.State, st.Reason, 0)
		}
		return
	}
	if !p.retryAt.IsZero() && fs.clock.now().Before(p.retryAt) {
		return // its backoff's wake-up opens it
	}
	cs, err := fs.front.cluster(p.name)
	if err != nil || cs.retiredCause() != nil {
		return // its successor is not there yet
	}
	fs.startOpen(p, cs, fs.pos[p.name])
}

// close ends every part; an open under way ends its subscription when it
// returns.
func (fs *fleetStream) close() {
	fs.mu.Lock()
	fs.closed = true
	opened := fs.opened
	fs.opened = nil
	fs.mu.Unlock()
	for _, r := range opened {
		if r.sub != nil {
			r.cs.streams.unsubscribe(r.sub)
		}
	}
	for _, p := range fs.parts {
		fs.endSub(p)
		fs.stopRetry(p)
	}
	fs.front.fleetStates.unsubscribe(fs.wake)
}

// bookmark is the message that tells a client where to resume the whole
// stream; false before any cluster has a position.
func (fs *fleetStream) bookmark() ([]byte, bool) {
	if len(fs.pos) == 0 {
		return nil, false
	}
	b := append(append([]byte(nil), fs.idTag...), `"type":"BOOKMARK","resume":`...)
	return append(jsonscan.AppendString(b, fs.resume()), '}'), true
}
