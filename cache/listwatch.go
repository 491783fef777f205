package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
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

// ListWithContext reads one page of the collection. A page that fits in
// bufferedList bytes is parsed in place with gjson (the fast path); a larger
// one — an API server serving from its watch cache ignores limit and sends
// the whole collection at once — is decoded item by item as it arrives, so
// memory holds the objects, never the whole response as well. A response
// that sends nothing for listTimeout is abandoned as hung.
func (lw *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(lw.listTimeout, cancel)
	defer idle.Stop()
	u := lw.client.collectionURL(lw.res, lw.namespace, listQuery(opts, lw.labelSelector, lw.fieldSelector))
	resp, err := lw.client.get(ctx, u)
	if err != nil {
		lw.conn.failed(err)
		return nil, err
	}
	defer resp.Body.Close()
	body := &idleReader{r: resp.Body, timer: idle, d: lw.listTimeout}
	head, err := io.ReadAll(io.LimitReader(body, int64(bufferedList)+1))
	var list *objectList
	switch {
	case err != nil:
	case len(head) <= bufferedList:
		list, err = lw.decodeList(head)
	default:
		list, err = lw.decodeListStream(io.MultiReader(bytes.NewReader(head), body))
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("nothing received for %s: %w", lw.listTimeout, err)
		}
		lw.conn.failed(err)
		return nil, fmt.Errorf("reading %s list: %w", lw.res.Plural, err)
	}
	return list, nil
}

// bufferedList is the largest list response parsed in one piece.
var bufferedList = 64 << 20 // a variable for tests

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

// decodeListStream reads {"metadata":…,"items":[…]} token by token, building
// each object as soon as its bytes are read.
func (lw *listWatch) decodeListStream(r io.Reader) (*objectList, error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	list := &objectList{}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch key {
		case "metadata":
			if err := dec.Decode(&list.ListMeta); err != nil {
				return nil, err
			}
		case "items":
			if err := lw.decodeItems(dec, list); err != nil {
				return nil, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, err
			}
		}
	}
	return list, expectDelim(dec, '}')
}

func (lw *listWatch) decodeItems(dec *json.Decoder, list *objectList) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		obj, err := lw.shape.Build(raw)
		if err != nil {
			return fmt.Errorf("%s list item: %w", lw.res.Plural, err)
		}
		list.Items = append(list.Items, obj)
	}
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("list response: expected %q, got %v", want, tok)
	}
	return nil
}

func (lw *listWatch) decodeList(body []byte) (*objectList, error) {
	meta := gjson.GetManyBytes(body, "metadata.resourceVersion", "metadata.continue",
		"metadata.remainingItemCount", "items")
	list := &objectList{}
	list.ResourceVersion = meta[0].Str
	list.Continue = meta[1].Str
	if meta[2].Exists() {
		n := meta[2].Int()
		list.RemainingItemCount = &n
	}
	var bad error
	meta[3].ForEach(func(_, item gjson.Result) bool {
		obj, err := lw.shape.Build([]byte(item.Raw))
		if err != nil {
			bad = fmt.Errorf("%s list item: %w", lw.res.Plural, err)
			return false
		}
		list.Items = append(list.Items, obj)
		return true
	})
	return list, bad
}

// WatchWithContext opens a watch stream. The stream is decoded frame by frame
// by watchDecoder; client-go's StreamWatcher turns it into events.
func (lw *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	q := listQuery(opts, lw.labelSelector, lw.fieldSelector)
	q.Set("watch", "true")
	// The idle timer runs from the request on: a connection that never
	// answers the request is as hung as one that stops mid-stream.
	ctx, cancel := context.WithCancel(ctx)
	d := &watchDecoder{res: lw.res, shape: lw.shape, conn: lw.conn, idleTimeout: lw.idleTimeout, cancel: cancel}
	d.idle = time.AfterFunc(lw.idleTimeout, func() {
		d.timedOut.Store(true)
		cancel()
	})
	resp, err := lw.client.get(ctx, lw.client.collectionURL(lw.res, lw.namespace, q))
	if err != nil {
		d.idle.Stop()
		cancel()
		if d.timedOut.Load() {
			err = fmt.Errorf("%s watch: no answer for %s: %w", lw.res.Plural, lw.idleTimeout, err)
		}
		lw.conn.failed(err)
		return nil, err
	}
	d.body, d.dec = resp.Body, json.NewDecoder(resp.Body)
	d.idle.Reset(lw.idleTimeout)
	lw.conn.opened()
	return watch.NewStreamWatcher(d, &errorReporter{}), nil
}

// watchDecoder reads newline-delimited watch events.
type watchDecoder struct {
	body  io.Closer
	dec   *json.Decoder
	res   *Resource
	shape Shape
	conn  *connState
	ended sync.Once

	idle        *time.Timer
	idleTimeout time.Duration
	timedOut    atomic.Bool
	cancel      context.CancelFunc // ends the request, and with it the stream
}

type watchFrame struct {
	Type   watch.EventType `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Decode implements watch.Decoder.
func (d *watchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	var f watchFrame
	if err := d.dec.Decode(&f); err != nil {
		if d.timedOut.Load() {
			err = fmt.Errorf("%s watch sent nothing for %s: closed as hung", d.res.Plural, d.idleTimeout)
		}
		d.end(err)
		return "", nil, err
	}
	d.idle.Reset(d.idleTimeout)
	switch f.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		obj, err := d.shape.Build(f.Object)
		if err != nil {
			return "", nil, fmt.Errorf("%s watch %s event: %w", d.res.Plural, f.Type, err)
		}
		return f.Type, obj, nil
	case watch.Bookmark:
		rv := gjson.GetBytes(f.Object, "metadata.resourceVersion").Str
		return f.Type, &Object{resourceVersion: rv}, nil
	case watch.Error:
		st := &metav1.Status{}
		if err := json.Unmarshal(f.Object, st); err != nil {
			return "", nil, fmt.Errorf("%s watch error event: %w", d.res.Plural, err)
		}
		return f.Type, st, nil
	}
	return "", nil, fmt.Errorf("%s watch: unknown event type %q", d.res.Plural, f.Type)
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

// connState tracks whether the watch of one informer is open. It is safe for
// concurrent use.
type connState struct {
	mu        sync.Mutex
	connected bool
	since     time.Time // when connected last changed
	lastError string
	restarts  int64
	now       func() time.Time
}

func newConnState(now func() time.Time) *connState {
	return &connState{since: now(), now: now}
}

func (c *connState) opened() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.connected {
		c.connected, c.since = true, c.now()
	}
	c.restarts++
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
	LastError string
	Restarts  int64
}

func (c *connState) snapshot() connSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return connSnapshot{c.connected, c.since, c.lastError, c.restarts}
}
