package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
)

// The informers of the kinformers figure: each one a client-go Reflector
// (what a SharedInformer runs to list and watch) over its own HTTP
// connection, as N agents on N nodes would be. To keep N = 100 of them
// beside a 50,000-pod cluster on one machine, each decodes only the pods'
// names, namespaces and resourceVersions (a PartialObjectMetadata, streamed
// item by item from the list) and keeps only keys and resourceVersions in
// its store. The server does the same work as for a typed informer; the
// client does less.

// informerMode is how a reflector gets its initial state.
type informerMode string

const (
	// modeList: a list (resourceVersion=0, as a reflector's first list)
	// then a watch from its resourceVersion. client-go before 1.35, and
	// 1.35+ with the WatchListClient feature off.
	modeList informerMode = "list"
	// modeWatchList: one watch with sendInitialEvents=true, the initial
	// state streamed as ADDED events up to a bookmark. client-go 1.35+'s
	// default.
	modeWatchList informerMode = "watch-list"
)

// keyStore is a reflector's store that keeps each object's key and
// resourceVersion, and counts updates.
type keyStore struct {
	mu       sync.Mutex
	rvs      map[string]string
	synced   chan struct{} // closed at the first Replace
	once     sync.Once
	updates  atomic.Int64
	replaces atomic.Int64
	// updated counts the updates by key; nil: not counted.
	updated map[string]int
}

func newKeyStore() *keyStore { return &keyStore{rvs: map[string]string{}, synced: make(chan struct{})} }

func (s *keyStore) put(obj any) error {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.rvs[key] = m.ResourceVersion
	s.mu.Unlock()
	return nil
}

func metaOf(obj any) (*metav1.PartialObjectMetadata, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("keyStore: a %T", obj)
	}
	return m, nil
}

func (s *keyStore) Add(obj any) error { return s.put(obj) }

func (s *keyStore) Update(obj any) error {
	s.updates.Add(1)
	if s.updated != nil {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.updated[key]++
		s.mu.Unlock()
	}
	return s.put(obj)
}

func (s *keyStore) Delete(obj any) error {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.rvs, key)
	s.mu.Unlock()
	return nil
}

func (s *keyStore) Replace(list []any, _ string) error {
	rvs := make(map[string]string, len(list))
	for _, obj := range list {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		m, err := metaOf(obj)
		if err != nil {
			return err
		}
		rvs[key] = m.ResourceVersion
	}
	s.mu.Lock()
	s.rvs = rvs
	s.mu.Unlock()
	s.replaces.Add(1)
	s.once.Do(func() { close(s.synced) })
	return nil
}

func (s *keyStore) Resync() error { return nil }

func (s *keyStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rvs)
}

// failures counts an informer set's failed requests by reason.
type failures struct {
	mu      sync.Mutex
	reasons map[string]int
	by      map[int]bool // informers that failed at least once
}

var digits = regexp.MustCompile(`\d+`)

// add records err for informer i; numbers (stream IDs, sizes, ports) are
// folded so that one cause counts as one reason.
func (f *failures) add(i int, what string, err error) {
	reason := what + ": " + digits.ReplaceAllString(err.Error(), "N")
	if len(reason) > 200 {
		reason = reason[:200] + "…"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reasons == nil {
		f.reasons, f.by = map[string]int{}, map[int]bool{}
	}
	f.reasons[reason]++
	f.by[i] = true
}

// summary is "none", or the count of failed requests and each reason.
func (f *failures) summary() (informers, requests int, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rs []string
	for r, n := range f.reasons {
		rs = append(rs, fmt.Sprintf("%d× %q", n, r))
		requests += n
	}
	sort.Strings(rs)
	if len(rs) == 0 {
		return 0, 0, "none"
	}
	return len(f.by), requests, strings.Join(rs, ", ")
}

// podLW lists and watches the pods of one server for one reflector,
// decoding only metadata, and records every failed request.
type podLW struct {
	hc        *http.Client
	base      string // up to and excluding /api/v1
	mode      informerMode
	i         int
	fail      *failures
	lists     *atomic.Int64
	watchList *atomic.Int64
	// shard is the shardSelector of every request; empty: none.
	shard string
}

var (
	_ cache.ListerWatcherWithContext = (*podLW)(nil)
	_ cache.ListerWatcher            = (*podLW)(nil)
)

// IsWatchListSemanticsUnSupported makes a reflector in list mode list,
// whatever client-go's WatchListClient feature says.
func (lw *podLW) IsWatchListSemanticsUnSupported() bool { return lw.mode == modeList }

func (lw *podLW) List(o metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), o)
}

func (lw *podLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), o)
}

func (lw *podLW) get(ctx context.Context, o metav1.ListOptions) (*http.Response, error) {
	o.ShardSelector = lw.shard
	q, err := scheme.ParameterCodec.EncodeParameters(&o, corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lw.base+"/api/v1/pods?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := lw.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var st metav1.Status
		if json.Unmarshal(b, &st) == nil && st.Kind == "Status" {
			return nil, &apierrors.StatusError{ErrStatus: st}
		}
		return nil, apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodGet, corev1.Resource("pods"), "", string(b), 0, true)
	}
	return resp, nil
}

// slimObject is all an informer here decodes of an object.
type slimObject struct {
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		ResourceVersion string            `json:"resourceVersion"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
}

func (o *slimObject) partial(annotations bool) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Metadata.Name, Namespace: o.Metadata.Namespace, ResourceVersion: o.Metadata.ResourceVersion},
	}
	if annotations {
		p.Annotations = o.Metadata.Annotations
	}
	return p
}

func (lw *podLW) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	lw.lists.Add(1)
	list, err := lw.list(ctx, o)
	if err != nil && ctx.Err() == nil {
		lw.fail.add(lw.i, "list", err)
	}
	return list, err
}

// list streams the list's body, one item at a time: the informer never
// holds the body or a decoded pod.
func (lw *podLW) list(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	resp, err := lw.get(ctx, o)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	list := &metav1.PartialObjectMetadataList{}
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch t {
		case "metadata":
			err = dec.Decode(&list.ListMeta)
		case "items":
			if err = expectDelim(dec, '['); err != nil {
				break
			}
			for dec.More() {
				var item slimObject
				if err = dec.Decode(&item); err != nil {
					return nil, fmt.Errorf("after %d items: %w", len(list.Items), err)
				}
				list.Items = append(list.Items, *item.partial(false))
			}
			err = expectDelim(dec, ']')
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, err
		}
	}
	return list, expectDelim(dec, '}')
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != d {
		return fmt.Errorf("want %q, got %v", d, t)
	}
	return nil
}

func (lw *podLW) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		lw.watchList.Add(1)
	}
	o.Watch = true
	resp, err := lw.get(ctx, o)
	if err != nil {
		if ctx.Err() == nil {
			lw.fail.add(lw.i, "watch", err)
		}
		return nil, err
	}
	w := &slimWatch{body: resp.Body, ch: make(chan watch.Event), stop: make(chan struct{})}
	go w.read(ctx, lw)
	return w, nil
}

// slimWatch is a watch.Interface over a JSON watch stream, its objects
// decoded as slimObjects.
type slimWatch struct {
	body     io.ReadCloser
	ch       chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *slimWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.body.Close()
	})
}

func (w *slimWatch) ResultChan() <-chan watch.Event { return w.ch }

func (w *slimWatch) read(ctx context.Context, lw *podLW) {
	defer close(w.ch)
	defer w.body.Close()
	dec := json.NewDecoder(w.body)
	for {
		var ev struct {
			Type   watch.EventType `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		err := dec.Decode(&ev)
		if err == nil {
			var out watch.Event
			out, err = slimEvent(ev.Type, ev.Object)
			if err == nil {
				select {
				case w.ch <- out:
					continue
				case <-w.stop:
					return
				}
			}
		}
		select {
		case <-w.stop:
			return
		default:
		}
		if ctx.Err() == nil && !errors.Is(err, io.EOF) {
			lw.fail.add(lw.i, "watch stream", err)
		}
		return
	}
}

func slimEvent(t watch.EventType, raw json.RawMessage) (watch.Event, error) {
	if t == watch.Error {
		var st metav1.Status
		if err := json.Unmarshal(raw, &st); err != nil {
			return watch.Event{}, err
		}
		return watch.Event{Type: t, Object: &st}, nil
	}
	var o slimObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return watch.Event{}, err
	}
	// A bookmark's annotation says where the initial events end.
	return watch.Event{Type: t, Object: o.partial(t == watch.Bookmark)}, nil
}

// informerSet is N reflectors on one server.
type informerSet struct {
	stores    []*keyStore
	fail      failures
	lists     atomic.Int64
	watchList atomic.Int64
	done      sync.WaitGroup
}

// startInformerSet starts n reflectors in mode, each with its own HTTP
// client from newClient, until ctx ends.
func startInformerSet(ctx context.Context, newClient func() (*http.Client, error), base string, mode informerMode, n int) (*informerSet, error) {
	s := &informerSet{}
	for i := range n {
		hc, err := newClient()
		if err != nil {
			return s, err
		}
		lw := &podLW{hc: hc, base: base, mode: mode, i: i, fail: &s.fail, lists: &s.lists, watchList: &s.watchList}
		st := newKeyStore()
		r := cache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, st, cache.ReflectorOptions{
			Name: fmt.Sprintf("bench-informer-%d", i), TypeDescription: "pods"})
		s.stores = append(s.stores, st)
		s.done.Go(func() {
			r.RunWithContext(ctx)
			hc.CloseIdleConnections()
		})
	}
	return s, nil
}

// waitSynced waits until every reflector has synced, the deadline passes
// or stop is closed, and returns how many synced and when the last of them
// did.
func (s *informerSet) waitSynced(stop <-chan struct{}, begin, deadline time.Time) (synced int, last time.Duration) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for _, st := range s.stores {
		select {
		case <-st.synced:
		case <-timer.C:
			return len(s.syncedNow()), time.Since(begin)
		case <-stop:
			return len(s.syncedNow()), time.Since(begin)
		}
	}
	return len(s.stores), time.Since(begin)
}

// syncedNow is the indexes of the reflectors synced so far.
func (s *informerSet) syncedNow() []int {
	var out []int
	for i, st := range s.stores {
		select {
		case <-st.synced:
			out = append(out, i)
		default:
		}
	}
	return out
}

// waitUpdates waits until each reflector of idx has seen want updates
// since before (the counts when the churn began), the deadline passes or
// stop is closed, and returns how many saw them all.
func (s *informerSet) waitUpdates(stop <-chan struct{}, idx []int, before []int64, want int64, deadline time.Time) int {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		all := 0
		for _, i := range idx {
			if s.stores[i].updates.Load()-before[i] >= want {
				all++
			}
		}
		if all == len(idx) || time.Now().After(deadline) {
			return all
		}
		select {
		case <-tick.C:
		case <-stop:
			return all
		}
	}
}

func (s *informerSet) updateCounts() []int64 {
	out := make([]int64, len(s.stores))
	for i, st := range s.stores {
		out[i] = st.updates.Load()
	}
	return out
}
