package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/text"
)

// fleetAsk is a stream across clusters as asked, read and checked before
// any cluster is: which clusters, from which positions, and how each
// cluster's part opens.
type fleetAsk struct {
	kind     string
	names    []string
	follow   bool              // no ?cluster=: every cluster, as the configuration changes
	from     map[string]string // the token's positions
	snapshot bool
	open     partOpener
}

// The bounds of a resume token across clusters: a token beyond them is
// no token this server made.
const (
	maxTokenClusters = 1000
	maxTokenPosition = 64
)

// fleetPositions is a resume token across clusters: the stream's kind
// and each cluster's own position. A cluster not in it starts afresh.
type fleetPositions struct {
	Kind string            `json:"r"`
	Pos  map[string]string `json:"p"`
}

func encodeFleetPositions(kind string, pos map[string]string) string {
	b, _ := json.Marshal(fleetPositions{kind, pos})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeFleetPositions reads a token of a stream of kind: every cluster a
// DNS label, every position a short printable string; anything else is a
// 400 that says to start without it.
func decodeFleetPositions(s, kind string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("%w: resourceVersion is not a resume token of a stream across clusters (%s); start without it", errBadRequest, why)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad("not base64url")
	}
	var t fleetPositions
	if err := json.Unmarshal(b, &t); err != nil || t.Pos == nil {
		return nil, bad("malformed")
	}
	if t.Kind != kind {
		return nil, bad(fmt.Sprintf("it belongs to a stream of %q", text.Truncate(t.Kind, 64)))
	}
	if len(t.Pos) > maxTokenClusters {
		return nil, bad("too many clusters")
	}
	for name, p := range t.Pos {
		if len(validation.IsDNS1123Label(name)) > 0 {
			return nil, bad(fmt.Sprintf("cluster %q", text.Truncate(name, 64)))
		}
		if p == "" || len(p) > maxTokenPosition || !printable(p) {
			return nil, bad(fmt.Sprintf("cluster %s's position", name))
		}
	}
	return t.Pos, nil
}

func printable(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// newFleetAsk reads what every stream across clusters takes: the
// clusters (comma-separated, or every one), the token and snapshot.
func (f *Server) newFleetAsk(kind, clusters, token, snapshot string) (*fleetAsk, error) {
	names, err := f.clusterNames(clusters)
	if err != nil {
		return nil, err
	}
	from, err := decodeFleetPositions(token, kind)
	if err != nil {
		return nil, err
	}
	fa := &fleetAsk{kind: kind, names: names, follow: clusters == "", from: from, snapshot: true}
	if snapshot != "" {
		if fa.snapshot, err = strconv.ParseBool(snapshot); err != nil {
			return nil, fmt.Errorf("%w: snapshot must be true or false, got %q", errBadRequest, text.Truncate(snapshot, 16))
		}
	}
	return fa, nil
}

// resourceOpener opens a resource's part in a cluster, authorized as the
// user under that cluster's prefix (its own authorizer narrows it), its
// access reviews bounded as that cluster's part of an answer across
// clusters (ClusterPartContext): a cluster whose API server does not
// answer them makes its own part a 503, tried again later.
func resourceOpener(ctx context.Context, user *auth.User, resource string, q cache.WatchQuery) partOpener {
	return func(cs *Server, name, from string, snapshot bool, notify chan<- struct{}) (cache.Subscription, error) {
		wq := q
		wq.ResourceVersion, wq.Snapshot = from, from == "" && snapshot
		wq.QueueSize = cs.streams.opts.QueueSize
		pctx, cancel := cs.ClusterPartContext(ctx, name)
		defer cancel()
		if err := (access{s: cs, ctx: pctx, user: user}).restrictWatch(resource, &wq); err != nil {
			return nil, err
		}
		return cs.streams.subscribe(cs.r, resource, wq, notify)
	}
}

// addressOpener opens the address stream's part in a cluster, as
// resourceOpener does. An address stream always opens with its snapshot
// (RESET) when it cannot resume.
func addressOpener(ctx context.Context, user *auth.User, q cache.AddressWatchQuery) partOpener {
	return func(cs *Server, name, from string, _ bool, notify chan<- struct{}) (cache.Subscription, error) {
		aq := q
		aq.ResourceVersion, aq.QueueSize = from, cs.streams.opts.QueueSize
		pctx, cancel := cs.ClusterPartContext(ctx, name)
		defer cancel()
		if err := (access{s: cs, ctx: pctx, user: user}).restrictAddresses(&aq); err != nil {
			return nil, err
		}
		return cs.streams.admit(func() (cache.Subscription, error) { return cs.r.WatchAddresses(aq, notify) })
	}
}

// start opens every asked cluster's part at once (one slow to authorize
// holds up the start by AuthOptions.ClusterTimeout at most, one slow to
// reach its position by its own delay only) and builds the stream. A
// parameter any cluster cannot read is the caller's error (400, as for a
// list across clusters); a resource no serving cluster has is a 404.
// Other refusals are that cluster's CLUSTER message.
func (f *Server) startFleetStream(fa *fleetAsk, wake chan struct{}, id string) (*fleetStream, error) {
	results := make([]partResult, len(fa.names))
	var wg sync.WaitGroup
	for i, name := range fa.names {
		wg.Go(func() {
			cs, err := f.cluster(name)
			if err != nil {
				results[i] = partResult{err: err}
				return
			}
			from := fa.from[name]
			sub, err := fa.open(cs, name, from, fa.snapshot, wake)
			results[i] = partResult{cs: cs, sub: sub, err: err}
		})
	}
	wg.Wait()
	var fail error
	unknown, serving := false, false
	for _, r := range results {
		code := http.StatusOK
		if r.err != nil {
			code = int(errorStatus(r.err).Code)
		}
		switch {
		case fail == nil && r.err != nil && callersError(r.err) != nil:
			fail = r.err
		case code == http.StatusNotFound:
			unknown = true
		case code != http.StatusServiceUnavailable:
			serving = true
		}
	}
	if fail == nil && unknown && !serving {
		fail = fmt.Errorf("%w: no cluster serves %q (each cluster's resources: GET /clusters/{name}/api/v1/resources)",
			cache.ErrUnknownResource, fa.kind)
	}
	if fail != nil {
		for _, r := range results {
			if r.sub != nil {
				r.cs.streams.unsubscribe(r.sub)
			}
		}
		return nil, fail
	}
	return f.newFleetStream(fa.kind, fa.names, fa.follow, fa.from, fa.snapshot, fa.open, wake, id, results), nil
}

// fleetWatch serves GET /api/v1/{resource}?watch=true on a fleet's
// front: one subscription over several or every cluster, as SSE or a
// WebSocket; every parameter of a cluster's watch, and cluster.
func (f *Server) fleetWatch(c echo.Context) error {
	q, err := queryParams(c, slices.Concat(watchParams, []string{"cluster"})...)
	if err != nil {
		return err
	}
	resource, err := pathParam(c, "resource")
	if err != nil {
		return err
	}
	if w := q.Get("watch"); w != "true" && w != "1" {
		return fmt.Errorf("%w: watch=%q: use watch=true for a stream, or leave watch out for a list", errBadRequest, text.Truncate(w, 16))
	}
	token := q.Get("resourceVersion")
	if id := c.Request().Header.Get("Last-Event-ID"); id != "" && acceptsEventStream(c.Request()) {
		token = id
	}
	fa, err := f.newFleetAsk(resource, q.Get("cluster"), token, q.Get("snapshot"))
	if err != nil {
		return err
	}
	wq, err := watchQuery(q.Get("namespace"), q.Get("labelSelector"), q.Get("index"), q.Get("value"), "", "", q.Get("diff"))
	if err != nil {
		return err
	}
	fa.open = resourceOpener(f.streams.ctx, userOf(c), resource, wq)
	return f.serveFleetStream(c, fa)
}

// fleetWatchAddresses serves GET /api/v1/ip:watch on a fleet's front: the
// address stream of several or every cluster.
func (f *Server) fleetWatchAddresses(c echo.Context) error {
	q, err := queryParams(c, slices.Concat(ipWatchParams, []string{"cluster"})...)
	if err != nil {
		return err
	}
	token := q.Get("resourceVersion")
	if id := c.Request().Header.Get("Last-Event-ID"); id != "" && acceptsEventStream(c.Request()) {
		token = id
	}
	fa, err := f.newFleetAsk(cache.AddressStream, q.Get("cluster"), token, "")
	if err != nil {
		return err
	}
	aq := addressWatchQuery(q.Get("kinds"), q.Get("node"), "")
	if err := aq.Check(); err != nil {
		return err
	}
	fa.open = addressOpener(f.streams.ctx, userOf(c), aq)
	return f.serveFleetStream(c, fa)
}

// serveFleetStream serves a stream across clusters on the transport the
// request asks for.
func (f *Server) serveFleetStream(c echo.Context, fa *fleetAsk) error {
	req := c.Request()
	switch {
	case websocket.IsWebSocketUpgrade(req):
		wake := make(chan struct{}, 1)
		fs, err := f.startFleetStream(fa, wake, "")
		if err != nil {
			return err
		}
		ws, err := f.openSocket(c, nil, false, wake)
		if err != nil {
			fs.close()
			return ignoreHijacked(err)
		}
		ws.subs = append(ws.subs, &wsSub{fleet: fs})
		ws.run()
		return nil
	case acceptsEventStream(req):
		return f.fleetSSE(c, fa)
	}
	return fmt.Errorf("%w: watch=true is a stream: open it as a WebSocket (an Upgrade: websocket request), "+
		"or as Server-Sent Events with the header Accept: text/event-stream "+
		"(curl -N -H 'Accept: text/event-stream' '%s')", errBadRequest, req.URL.RequestURI())
}

// fleetSSE streams a subscription across clusters as Server-Sent Events:
// "id:" is the resume token, which a browser EventSource sends back as
// Last-Event-ID; a cluster's RESYNC_REQUIRED keeps it (the token forgets
// that cluster only).
func (f *Server) fleetSSE(c echo.Context, fa *fleetAsk) error {
	wake := make(chan struct{}, 1)
	fs, err := f.startFleetStream(fa, wake, "")
	if err != nil {
		return err
	}
	defer fs.close()
	out, done := f.beginSSE(c)
	defer done()
	life := f.startLife(c, 0, nil)
	defer life.stop()
	if err := f.fleetPump(c.Request().Context(), fs, out, life); err != nil {
		f.log.Debug("event stream across clusters ended", "resource", fa.kind, "err", err)
	}
	return nil
}

// fleetPump is pump for a stream across clusters.
func (f *Server) fleetPump(ctx context.Context, fs *fleetStream, out *sseWriter, life *streamLife) error {
	pace := newPacer(f.streams.opts.Coalesce)
	for {
		pace.hold()
		wrote := false
		for n := 1; ; n++ {
			it, ok := fs.nextItem()
			if !ok {
				break
			}
			wrote = true
			if err := out.writeFleet(it); err != nil {
				out.release()
				return err
			}
			if n%256 == 0 && (ctx.Err() != nil || f.streams.ctx.Err() != nil) {
				out.release()
				return nil
			}
		}
		if err := out.flush(); err != nil {
			return err
		}
		if wrote {
			pace.wrote(fs.wake)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.streams.ctx.Done():
			return nil
		case <-life.ended:
			if errors.Is(life.why, errLifetimeOver) {
				if b, ok := fs.bookmark(); ok {
					if err := out.writeFleet(fleetItem{raw: b, typ: cache.Bookmark, resume: fs.resume()}); err != nil {
						out.release()
						return err
					}
				}
				return out.flush()
			}
			return out.end(life.why, "")
		case <-fs.wake:
		}
	}
}

// writeFleet writes one message of a stream across clusters as an SSE
// event: its cluster's message behind its tag, or a whole message.
func (w *sseWriter) writeFleet(it fleetItem) error {
	w.begin()
	if it.resume != "" {
		w.bw.WriteString("id: ")
		w.bw.WriteString(it.resume)
		w.bw.WriteByte('\n')
	}
	typ := it.typ
	if it.raw == nil {
		typ = it.m.Type
	}
	w.bw.WriteString("event: ")
	w.bw.WriteString(string(typ))
	w.bw.WriteString("\ndata: ")
	b := it.raw
	if b == nil {
		b = spliceTag(it.tag, &it.m)
		w.delivery.add(&it.m)
	}
	if _, err := (sseData{w.bw}).Write(b); err != nil {
		return err
	}
	_, err := w.bw.WriteString("\n\n")
	return err
}

// spliceTag is m's JSON with tag (`{…,`) in place of its opening brace.
func spliceTag(tag []byte, m *cache.Message) []byte {
	b := make([]byte, 0, len(tag)+m.Len())
	b = append(b, tag[:len(tag)-1]...)
	i := len(b)
	b = m.AppendTo(b)
	b[i] = ','
	return b
}

// prepareFleet reads and opens a subscribe message on a fleet's front,
// on the reader goroutine (as authorize does): each cluster's part is
// authorized there as under its prefix.
func (w *wsConn) prepareFleet(cmd clientCmd) clientCmd {
	m := cmd.msg
	kind := m.Resource
	fa, err := w.srv.newFleetAsk(kind, m.Cluster, m.ResourceVersion, snapshotText(m.Snapshot))
	if err != nil {
		cmd.err = err
		return cmd
	}
	if kind == cache.AddressStream {
		aq := addressWatchQuery(m.Kinds, m.Node, "")
		if cmd.err = aq.Check(); cmd.err != nil {
			return cmd
		}
		fa.open = addressOpener(w.hub.ctx, w.user, aq)
	} else {
		wq, err := watchQuery(m.Namespace, m.LabelSelector, m.Index, m.Value, "", "", m.Diff)
		if err != nil {
			cmd.err = err
			return cmd
		}
		fa.open = resourceOpener(w.hub.ctx, w.user, kind, wq)
	}
	cmd.fleet, cmd.err = w.srv.startFleetStream(fa, w.wake, m.ID)
	return cmd
}

func snapshotText(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// subscribeFleet adds a stream across clusters opened by prepareFleet.
func (w *wsConn) subscribeFleet(id string, fs *fleetStream) error {
	if err := w.checkNewSubscription(id); err != nil {
		fs.close()
		return w.sendRaw(errorMessage(id, err))
	}
	w.subs = append(w.subs, &wsSub{id: id, fleet: fs})
	signal(w.wake)
	return nil
}

// drainFleet is drainOne for a stream across clusters, which never ends
// by itself: a cluster's end is that cluster's.
func (w *wsConn) drainFleet(fs *fleetStream) (full bool, err error) {
	for range maxMessagesPerWake {
		if w.hub.ctx.Err() != nil {
			return true, nil
		}
		it, ok := fs.nextItem()
		if !ok {
			return false, nil
		}
		if it.raw != nil {
			err = w.frames.addRaw(it.raw)
		} else {
			err = w.frames.add(&it.m, it.tag)
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// stateWatch follows the fleet's clusters for its streams: one poll of
// their states a second, for every stream of the front together, waking
// each when one changed (a state or its reason, or the server serving
// it; counts do not count).
type stateWatch struct {
	mu      sync.Mutex
	started bool
	wakes   map[chan struct{}]int
	states  []ClusterState
	servers []*Server
	gen     uint64
}

// fleetStatesEvery is how often the states are read.
const fleetStatesEvery = time.Second

// subscribe registers wake, starting the watch on first use (it ends
// with the server's streams).
func (sw *stateWatch) subscribe(f *Server, wake chan struct{}) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.wakes == nil {
		sw.wakes = map[chan struct{}]int{}
	}
	sw.wakes[wake]++
	if !sw.started {
		sw.started = true
		sw.states, sw.servers = readStates(f.opts.Clusters)
		sw.gen = 1
		go sw.run(f)
	}
}

func (sw *stateWatch) unsubscribe(wake chan struct{}) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.wakes[wake]--; sw.wakes[wake] <= 0 {
		delete(sw.wakes, wake)
	}
}

// current is the states last read and their generation.
func (sw *stateWatch) current() ([]ClusterState, uint64) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.states, sw.gen
}

func (sw *stateWatch) run(f *Server) {
	t := time.NewTicker(fleetStatesEvery)
	defer t.Stop()
	for {
		select {
		case <-f.streams.ctx.Done():
			return
		case <-t.C:
		}
		states, servers := readStates(f.opts.Clusters)
		sw.mu.Lock()
		if !slices.Equal(servers, sw.servers) || !slices.EqualFunc(states, sw.states, func(a, b ClusterState) bool {
			return a.Name == b.Name && a.State == b.State && a.Reason == b.Reason
		}) {
			sw.states, sw.servers = states, servers
			sw.gen++
			for wake := range sw.wakes {
				signal(wake)
			}
		}
		sw.mu.Unlock()
	}
}

// fleetListOrWatch is the front's /api/v1/{resource}: a list across
// clusters, or with watch a stream across them.
func (f *Server) fleetListOrWatch(c echo.Context) error {
	if watchRequested(c.Request().URL.RawQuery) {
		return f.fleetWatch(c)
	}
	return f.fleetList(c)
}

// readStates reads the clusters' states and the server serving each (nil
// when none).
func readStates(cl Clusters) ([]ClusterState, []*Server) {
	states := cl.States()
	servers := make([]*Server, len(states))
	for i, st := range states {
		servers[i], _ = cl.Cluster(st.Name)
	}
	return states, servers
}
