package e2e

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// observedLW is the ListerWatcher of one informer under test: it passes
// every call to the client (typed or dynamic, with kubeindex as its server)
// and records what client-go asked and got, so a test can prove how the
// informer synced (a list, or a streaming list with no list at all) and that
// a 410 made it relist. It can also end the current watches, and make the
// next watch start from a resourceVersion kubeindex no longer holds: the
// reflector then resumes from a too-old version, as after a long
// disconnection, and must be told 410 Expired.
type observedLW struct {
	list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	// noWatchList makes client-go's reflector list then watch even with its
	// WatchListClient feature on (see IsWatchListSemanticsUnSupported).
	noWatchList bool

	mu            sync.Mutex
	lists         int
	watches       []metav1.ListOptions
	initialEvents int // watches with sendInitialEvents=true
	expired       int // 410s seen, as a watch's error or an ERROR event
	events        int // events passed on by the current watch
	staleRV       string
	cut           chan struct{} // closed to end the current watches
}

func newObservedLW(list func(context.Context, metav1.ListOptions) (runtime.Object, error), watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), noWatchList bool) *observedLW {
	return &observedLW{list: list, watch: watchFn, noWatchList: noWatchList, cut: make(chan struct{})}
}

var (
	_ cache.ListerWatcher            = &observedLW{}
	_ cache.ListerWatcherWithContext = &observedLW{}
)

// IsWatchListSemanticsUnSupported is how client-go (util/watchlist) lets a
// ListerWatcher opt out of streaming lists, per informer, whatever the
// process-wide feature gate says.
func (o *observedLW) IsWatchListSemanticsUnSupported() bool { return o.noWatchList }

func (o *observedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return o.ListWithContext(context.Background(), opts)
}

func (o *observedLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return o.WatchWithContext(context.Background(), opts)
}

func (o *observedLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	o.mu.Lock()
	o.lists++
	o.mu.Unlock()
	return o.list(ctx, opts)
}

func (o *observedLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	o.mu.Lock()
	if o.staleRV != "" && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		opts.ResourceVersion, o.staleRV = o.staleRV, ""
	}
	o.watches = append(o.watches, opts)
	o.events = 0
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		o.initialEvents++
	}
	cut := o.cut
	o.mu.Unlock()
	w, err := o.watch(ctx, opts)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			o.mu.Lock()
			o.expired++
			o.mu.Unlock()
		}
		return nil, err
	}
	cw := &cuttableWatch{inner: w, out: make(chan watch.Event), done: make(chan struct{})}
	go cw.run(o, cut)
	return cw, nil
}

// resumeFromStale ends the current watches; the reflector then watches again
// from its last resourceVersion, which the next watch replaces with rv.
func (o *observedLW) resumeFromStale(rv string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.staleRV = rv
	close(o.cut)
	o.cut = make(chan struct{})
}

// stats is a snapshot of what the informer did.
type lwStats struct {
	Lists, Watches, InitialEvents, Expired, Events int
}

func (o *observedLW) stats() lwStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return lwStats{o.lists, len(o.watches), o.initialEvents, o.expired, o.events}
}

// cuttableWatch passes a watch's events on until the reflector stops it or
// the test cuts it; a cut closes the result channel, which the reflector
// takes as the server ending the watch.
type cuttableWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
}

func (c *cuttableWatch) ResultChan() <-chan watch.Event { return c.out }

func (c *cuttableWatch) Stop() {
	c.stopOnce.Do(func() {
		close(c.done)
		c.inner.Stop()
	})
}

func (c *cuttableWatch) run(o *observedLW, cut <-chan struct{}) {
	defer close(c.out)
	defer c.inner.Stop()
	in := c.inner.ResultChan()
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			o.mu.Lock()
			o.events++
			if ev.Type == watch.Error {
				if st, ok := ev.Object.(*metav1.Status); ok && (st.Code == 410 || st.Reason == metav1.StatusReasonExpired || st.Reason == metav1.StatusReasonGone) {
					o.expired++
				}
			}
			o.mu.Unlock()
			select {
			case c.out <- ev:
			case <-c.done:
				return
			case <-cut:
				return
			}
		case <-cut:
			return
		case <-c.done:
			return
		}
	}
}

// informerUnderTest is one informer with kubeindex as its server, and how
// the API server lists what it should hold.
type informerUnderTest struct {
	name     string
	lw       *observedLW
	informer cache.SharedIndexInformer
	// fieldSelector is the informer's (and the oracle list's) selector.
	fieldSelector string
	// watchList: synced by streaming lists, never by a list.
	watchList bool
}

// storeEntries returns the informer's objects as keys and versions.
func storeEntries(s cache.Store) ([]listEntry, error) {
	var out []listEntry
	for _, o := range s.List() {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		k := m.GetName()
		if m.GetNamespace() != "" {
			k = m.GetNamespace() + "/" + k
		}
		out = append(out, listEntry{k, m.GetResourceVersion()})
	}
	sortEntries(out)
	return out, nil
}

// waitSynced waits for the informers' first sync.
func waitSynced(ctx context.Context, timeout time.Duration, infs []*informerUnderTest) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, inf := range infs {
		if !cache.WaitForCacheSync(ctx.Done(), inf.informer.HasSynced) {
			return fmt.Errorf("informer %s did not sync within %v: %+v", inf.name, timeout, inf.lw.stats())
		}
	}
	return nil
}
