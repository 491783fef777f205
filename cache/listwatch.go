package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// objectList is what List hands the reflector: the page's metadata and its
// items, already compact. It satisfies meta.ListAccessor and meta.ExtractList.
type objectList struct {
	metav1.ListMeta
	Items []*Object
}

func (l *objectList) GetObjectKind() schema.ObjectKind  { return schema.EmptyObjectKind }
func (l *objectList) DeepCopyObject() runtime.Object    { return l }
func (l *objectList) GetListMeta() metav1.ListInterface { return &l.ListMeta }

// listWatch is a client-go ListerWatcher that reads list and watch responses
// as bytes: it keeps client-go's reflector (relist, backoff, 410 handling,
// bookmarks) and skips the generic decode into map[string]interface{}.
// It records on conn whether a watch is currently open.
type listWatch struct {
	client        *apiClient
	res           *Resource
	shape         Shape
	namespace     string
	labelSelector string
	fieldSelector string
	conn          *connState
	// listTimeout bounds one list page; idleTimeout closes a watch that has
	// sent nothing, not even a bookmark, for that long: a connection that
	// hangs without closing (a stuck proxy) would otherwise freeze the cache.
	listTimeout, idleTimeout time.Duration
	// prep, when set, makes each listed object's part for the handler as
	// the object is read (list_prep.go).
	prep *listPrep
}

// IsWatchListSemanticsUnSupported tells the reflector to use list+watch: the
// streaming "watch-list" protocol is not implemented here.
func (lw *listWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *listWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

func (lw *listWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// ListWithContext reads one page of the collection. The response is
// decoded as it arrives, item by item, in one pass over each item's bytes:
// an API server serving from its watch cache ignores limit and sends the
// whole collection at once (hundreds of megabytes for 50,000 pods), and
// memory then holds the objects, never the whole response as well. A
// response that sends nothing for listTimeout is abandoned as hung. A
// request that gets no answer is retried on the retry schedule until it
// does or ctx ends; a response cut short is not (its cost is the server's).
func (lw *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue == "" { // a new list, not its next page
		lw.prep.begin()
	}
	u := lw.client.collectionURL(lw.res, lw.namespace, listQuery(opts, lw.labelSelector, lw.fieldSelector))
	return retrying(ctx, func() (runtime.Object, bool, error) { return lw.listOnce(ctx, u) })
}

// listOnce makes one list request; it reports whether a failure is worth
// retrying.
func (lw *listWatch) listOnce(ctx context.Context, u string) (runtime.Object, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(lw.listTimeout, cancel)
	defer idle.Stop()
	var conn net.Conn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn }})
	resp, err := lw.client.get(ctx, u)
	if err != nil {
		lw.conn.failed(err)
		return nil, transient(err), err
	}
	defer resp.Body.Close()
	if resp.ProtoMajor == 1 && conn != nil { // an HTTP/2 connection carries watches too
		defer pace(conn)()
	}
	list, err := lw.decodeList(&idleReader{r: resp.Body, timer: idle, d: lw.listTimeout})
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("nothing received for %s: %w", lw.listTimeout, err)
		}
		lw.conn.failed(err)
		return nil, false, fmt.Errorf("reading %s list: %w", lw.res.Plural, err)
	}
	lw.conn.heard()
	lw.prep.ended(list.Continue)
	// What follows the list is the body's end (the last chunk's marker):
	// read, it lets the transport keep the connection for the watch that
	// follows rather than close it for a body left unread.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return list, false, nil
}

// idleReader pushes a deadline back each time bytes arrive.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.d)
	}
	return n, err
}

// decodeList reads {"metadata":…,"items":[…]}, building each object as
// soon as its bytes are in.
func (lw *listWatch) decodeList(r io.Reader) (*objectList, error) {
	s := newJSONStream(r, true)
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	list := &objectList{}
	for first := true; ; first = false {
		more, err := s.more('}', first)
		if err != nil {
			return nil, err
		}
		if !more {
			return list, nil
		}
		key, err := s.key()
		if err != nil {
			return nil, err
		}
		switch key {
		case "items":
			err = lw.decodeItems(s, list)
		case "metadata":
			var v []byte
			if v, err = s.value(); err == nil {
				err = json.Unmarshal(v, &list.ListMeta)
			}
		default:
			_, err = s.value()
		}
		if err != nil {
			return nil, err
		}
	}
}

func (lw *listWatch) decodeItems(s *jsonStream, list *objectList) error {
	if c, err := s.peek(); err != nil {
		return err
	} else if c == 'n' { // "items": null
		v, err := s.value()
		if err == nil && string(v) != "null" {
			err = fmt.Errorf("items: expected an array, got %.16q", v)
		}
		return err
	}
	if err := s.expect('['); err != nil {
		return err
	}
	for first := true; ; first = false {
		more, err := s.more(']', first)
		if err != nil || !more {
			return err
		}
		var obj inList
		err = s.parse(func(b []byte) (n int, err error) {
			obj.Object, n, err = lw.shape.build(b, &obj.input)
			if err == nil {
				lw.prep.prepare(&obj) // while b, which obj reads, is valid
			}
			return n, err
		})
		if err != nil {
			return fmt.Errorf("%s list item %d: %w", lw.res.Plural, len(list.Items), err)
		}
		list.Items = append(list.Items, obj.Object)
	}
}

// WatchWithContext opens a watch stream. The stream is decoded frame by frame
// by watchDecoder; client-go's StreamWatcher turns it into events. A request
// that gets no answer is retried on the retry schedule until it does or ctx
// ends: the reflector's own backoff is slow to notice a server come back.
func (lw *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	q := listQuery(opts, lw.labelSelector, lw.fieldSelector)
	q.Set("watch", "true")
	u := lw.client.collectionURL(lw.res, lw.namespace, q)
	return retrying(ctx, func() (watch.Interface, bool, error) {
		w, err := lw.watchOnce(ctx, u)
		return w, err != nil && transient(err), err
	})
}

func (lw *listWatch) watchOnce(ctx context.Context, u string) (watch.Interface, error) {
	// The idle timer runs from the request on: a connection that never
	// answers the request is as hung as one that stops mid-stream.
	ctx, cancel := context.WithCancel(ctx)
	d := &watchDecoder{res: lw.res, shape: lw.shape, conn: lw.conn, idleTimeout: lw.idleTimeout, cancel: cancel}
	d.idle = time.AfterFunc(lw.idleTimeout, func() {
		d.timedOut.Store(true)
		cancel()
	})
	resp, err := lw.client.get(ctx, u)
	if err != nil {
		d.idle.Stop()
		cancel()
		if d.timedOut.Load() {
			err = fmt.Errorf("%s watch: no answer for %s: %w", lw.res.Plural, lw.idleTimeout, err)
		}
		lw.conn.failed(err)
		return nil, err
	}
	d.body, d.stream = resp.Body, newJSONStream(resp.Body, false)
	d.idle.Reset(lw.idleTimeout)
	lw.conn.opened()
	return watch.NewStreamWatcher(d, &errorReporter{}), nil
}

// watchDecoder reads newline-delimited watch events.
type watchDecoder struct {
	body   io.Closer
	stream *jsonStream
	res    *Resource
	shape  Shape
	conn   *connState
	ended  sync.Once

	idle        *time.Timer
	idleTimeout time.Duration
	timedOut    atomic.Bool
	cancel      context.CancelFunc // ends the request, and with it the stream
}

// Decode implements watch.Decoder: it reads one event,
// {"type":…,"object":…}, walking its bytes once.
func (d *watchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	frame, err := d.stream.value()
	if err == nil {
		d.idle.Reset(d.idleTimeout)
		d.conn.heard() // bookmarks too: they are the liveness signal of a quiet watch
	}
	var typ watch.EventType
	var object []byte
	if err == nil {
		typ, object, err = readEvent(frame)
	}
	if err != nil {
		if d.timedOut.Load() {
			// Ended as if the server had closed it: the reflector then
			// watches again from its resource version at once, where an
			// error would cost a relist after its growing backoff.
			d.end(fmt.Errorf("%s watch sent nothing for %s: closed as hung", d.res.Plural, d.idleTimeout))
			return "", nil, io.EOF
		}
		d.end(err)
		return "", nil, err
	}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted:
		obj, err := d.shape.Build(object)
		if err != nil {
			return "", nil, fmt.Errorf("%s watch %s event: %w", d.res.Plural, typ, err)
		}
		return typ, obj, nil
	case watch.Bookmark:
		rv := gjson.GetBytes(object, "metadata.resourceVersion").Str
		return typ, &Object{resourceVersion: rv}, nil
	case watch.Error:
		st := &metav1.Status{}
		if err := json.Unmarshal(object, st); err != nil {
			return "", nil, fmt.Errorf("%s watch error event: %w", d.res.Plural, err)
		}
		return typ, st, nil
	}
	return "", nil, fmt.Errorf("%s watch: unknown event type %q", d.res.Plural, typ)
}

// readEvent takes the type and the object of a watch event.
func readEvent(frame []byte) (watch.EventType, []byte, error) {
	r, err := jsonscan.OpenObject(frame, 0)
	if err != nil {
		return "", nil, err
	}
	var typ string
	var object []byte
	for {
		more, err := r.Next()
		if err == jsonscan.ErrShort {
			err = jsonscan.SyntaxError(frame, len(frame), "event cut short")
		}
		if err != nil {
			return "", nil, err
		}
		if !more {
			return watch.EventType(typ), object, nil
		}
		end, err := r.Skip()
		if err != nil {
			return "", nil, err
		}
		switch string(r.Key) {
		case "type":
			if typ, err = jsonscan.String(frame[r.ValAt:end]); err != nil {
				return "", nil, fmt.Errorf("event type: %w", err)
			}
		case "object":
			object = frame[r.ValAt:end]
		}
	}
}

// Close implements watch.Decoder.
func (d *watchDecoder) Close() {
	d.idle.Stop()
	d.end(io.EOF)
	d.cancel()
	d.body.Close()
}

func (d *watchDecoder) end(err error) {
	d.ended.Do(func() { d.conn.closed(err) })
}

// errorReporter turns a broken stream into an Error event the reflector
// understands (it then re-lists or re-watches).
type errorReporter struct{}

func (errorReporter) AsObject(err error) runtime.Object {
	return &metav1.Status{Status: metav1.StatusFailure, Message: err.Error(),
		Reason: metav1.StatusReasonInternalError, Code: 500}
}

// connState tracks whether the watch of one informer is open, and when the
// API server was last heard from. It is safe for concurrent use.
type connState struct {
	mu        sync.Mutex
	connected bool
	since     time.Time // when connected last changed
	// lastHeard is when a list completed, a watch was answered or a watch
	// frame (an event or a bookmark) arrived: the API server was alive and
	// the cache up to date then. A watch that carries nothing, not even the
	// bookmark the API server sends about every minute, is presumed hung.
	lastHeard time.Time
	lastError string
	restarts  int64
	now       func() time.Time
}

func newConnState(now func() time.Time) *connState {
	t := now()
	return &connState{since: t, lastHeard: t, now: now}
}

func (c *connState) opened() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.connected {
		c.connected, c.since = true, c.now()
	}
	c.lastHeard = c.now()
	c.restarts++
}

// heard records that the API server sent something just now.
func (c *connState) heard() {
	t := c.now()
	c.mu.Lock()
	c.lastHeard = t
	c.mu.Unlock()
}

func (c *connState) closed(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.connected {
		c.connected, c.since = false, c.now()
	}
	if err != nil && err != io.EOF {
		c.lastError = err.Error()
	}
}

func (c *connState) failed(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.connected {
		c.connected, c.since = false, c.now()
	}
	c.lastError = err.Error()
}

type connSnapshot struct {
	Connected bool
	Since     time.Time
	LastHeard time.Time
	LastError string
	Restarts  int64
}

func (c *connState) snapshot() connSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return connSnapshot{c.connected, c.since, c.lastHeard, c.lastError, c.restarts}
}
