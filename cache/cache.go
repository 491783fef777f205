// Package cache keeps the configured Kubernetes resources in memory, indexed,
// from one client-go informer per resource (per namespace, when a resource
// is restricted to several namespaces). It answers reads; it has no HTTP.
package cache

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/ipowner"
	"github.com/kubeindex/kubeindex/query"
)

// nsIndex is the internal namespace index. Its name cannot collide with a
// configured index: those must start with a letter or digit.
const nsIndex = "__namespace"

// Cache holds every configured resource. Build it with New, run it with
// Start; the query methods are safe to call concurrently from any goroutine,
// before, during and after Start (they answer ErrNotSynced until synced).
type Cache struct {
	opts      Options
	resources []*resourceCache
	byName    map[string]*resourceCache
	started   atomic.Bool
	history   *ipowner.History // nil when ipowner.HistoryOptions.Off
	// mirror serves the address stream; nil when no pods, Services or
	// nodes are cached.
	mirror *ipowner.Mirror
	// owners answers the lookups of now (attachOwnerTable).
	owners *ipowner.Table[*Object]
	// asks are the slots for costly questions (ask.go).
	asks askSlots
	// podSorts are the sorts of the pods' standing ordered indexes
	// (order_standing.go).
	podSorts [][]query.SortKey
	// warmHook, when not nil, is called by the column warmer in each
	// pass over a resource, once it has listed the objects to warm and
	// offered the pass to questions to join ("warm"), as each of its
	// workers starts ("worker", on that worker's goroutine), once the
	// standing indexes to build have joined the set, before they list
	// theirs ("build"), and after each group of them is built ("built"):
	// tests make changes there; and as a worker steps aside for a costly
	// question ("aside") and goes on ("back"), on its goroutine.
	warmHook func(stage string)
	// walks keep the answers questions are paged through (ask_pages.go).
	walks walks
	// searches keep the hits searches are paged through (search_pages.go).
	searches searchWalks
	// wins are the live windows' views and parked windows (window.go).
	wins *windows
}

// resourceCache is one resource: its informers and their bookkeeping.
type resourceCache struct {
	res     Resource
	spec    Spec
	indexes map[string]indexers.Spec
	shape   Shape
	shards  []*shard
	opts    *Options
	broker  *broker        // fed by every shard's one handler; serves streams
	orders  *orders        // ordered indexes for questions, kept by the same handler (order.go)
	crds    *resourceCache // the cached CRDs, for a custom resource's field selectors; nil: none
	// crdWatch follows the resource's CRD when crds is nil and the
	// resource may be custom (crds.go); nil otherwise.
	crdWatch *crdWatch
}

// shard is one informer: the whole resource, or one namespace of it.
type shard struct {
	namespace string
	informer  informer
	conn      *connState
	lastEvent atomic.Int64 // unix nanoseconds; 0 = never
	// ips feeds ipowner; nil for resources that hold no addresses.
	ips *ipFeed
	// index is the namespace index and the configured ones, kept by the
	// one handler (store_index.go); the informer's store has none.
	index *valueIndexes
	// prep is what the list's reader makes of each listed object for
	// the handler to take (list_prep.go).
	prep *listPrep
	// ahead feeds the addresses of the adopted initial list
	// (addresses_feed_ahead.go); the handler's own, nil when none.
	// feeding is the same for other goroutines to ask.
	ahead   *feedAhead
	feeding atomic.Pointer[feedAhead]
	// holdFeed, when set (tests only), is the feed ahead's hold.
	holdFeed atomic.Pointer[func()]

	added, modified, deleted atomic.Int64
	// synced remembers that the informer has synced (hasSynced).
	synced atomic.Bool
	// hold, when set (tests only), is called before each event is handed
	// on: it stands for a handler that lags behind its reflector.
	hold atomic.Pointer[func()]
}

// hasSynced reports whether the shard's handler has seen the initial
// list, and its address feed has fed it (feedAhead). Every answer asks (its freshness), and the informer's own
// HasSynced takes its queue's lock, which is held while a batch of events
// is applied and handed to the handler: once true it stays true, so it
// is remembered, and answers no longer wait behind the events.
func (sh *shard) hasSynced() bool {
	if sh.synced.Load() {
		return true
	}
	if !sh.informer.HasSynced() {
		return false
	}
	if f := sh.feeding.Load(); f != nil && !f.finished() {
		return false
	}
	sh.synced.Store(true)
	return true
}

// feedAdd, feedUpdate and feedRemove hand an event to the address feed:
// to the feed ahead while the handler is given an adopted list
// (listPrep), else, once the feed ahead is done, to the feed itself.
func (sh *shard) feedAdd(obj any, initial bool, po preparedObject) {
	if sh.ips != nil && !sh.feedAhead(feedEvent{obj: obj, initial: initial, po: po}) {
		sh.ips.add(obj, initial, po)
	}
}

func (sh *shard) feedUpdate(old, cur any, po preparedObject) {
	if sh.ips != nil && !sh.feedAhead(feedEvent{obj: cur, old: old, update: true, po: po}) {
		sh.ips.update(old, cur)
	}
}

func (sh *shard) feedRemove(obj any) {
	if sh.ips != nil && !sh.feedAhead(feedEvent{obj: obj}) { // no list's: never queued
		sh.ips.remove(obj)
	}
}

// feedAhead queues ev on the feed ahead when its object is of an adopted
// list, starting the feed with the list's first; otherwise it waits for
// any feed ahead to be done, so that the feed sees the events in order.
// It reports whether ev was queued.
func (sh *shard) feedAhead(ev feedEvent) bool {
	if ev.po.indexed {
		if ev.po.first {
			var hold func()
			if h := sh.holdFeed.Load(); h != nil {
				hold = *h
			}
			sh.ahead = startFeedAhead(sh.ips, ev.po.left+1, hold)
			sh.feeding.Store(sh.ahead)
		}
		if sh.ahead != nil {
			sh.ahead.push(ev, ev.po.last)
			if ev.po.last {
				sh.ahead = nil
			}
			return true
		}
	}
	if sh.ahead != nil { // never so from client-go: a list's events come together
		sh.ahead.close()
		sh.ahead = nil
	}
	if f := sh.feeding.Load(); f != nil {
		<-f.done
	}
	return false
}

// informer is a shard's client-go informer: the reflector, queue and
// store of a shared informer (its indexes the shard's own, kept by the
// handler: indexedStore), but with its one handler called by the
// goroutine that applies each batch to the store, once the store has it.
// A shared informer hands each event to a registered handler through a
// listener's two goroutines, a cost BenchmarkInitialSync measures (figures
// in BENCHMARKS.md), for a fan-out to several handlers a shard never has. Its handler must not block (eventHandler does not: the broker and
// the address feed only record and wake their own goroutines).
type informer struct {
	toolscache.Indexer
	toolscache.Controller
}

func (i informer) GetIndexer() toolscache.Indexer { return i.Indexer }
func (i informer) GetStore() toolscache.Store     { return i.Indexer }

// apiConfig is cfg as a cache with opts reads the API server with.
func apiConfig(cfg *rest.Config, opts Options) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = !opts.Compression
	if !opts.HTTP2 {
		cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	return cfg
}

// HTTPClient is the client a cache with opts reads the API server at cfg
// with (see newAPIClient). Discovery asked through it before New, with
// New given it in Options.HTTPClient, shares its connection: one TLS
// handshake at start-up instead of two.
func HTTPClient(cfg *rest.Config, opts Options) (*http.Client, error) {
	return apiHTTPClient(apiConfig(cfg, opts))
}

// Configured pairs a resolved resource with its configuration.
type Configured struct {
	Resource Resource
	Spec     Spec
}

// New builds the informers for the given resources without starting them.
// Index specs must already be valid (indexers.Spec.Validate).
func New(cfg *rest.Config, resources []Configured, opts Options) (*Cache, error) {
	opts = opts.withDefaults()
	client, err := newAPIClient(apiConfig(cfg, opts), opts.HTTPClient)
	if err != nil {
		return nil, err
	}
	c := &Cache{opts: opts, byName: map[string]*resourceCache{}, asks: newAskSlots(), walks: newWalks(opts.Now),
		searches: newSearchWalks(opts.Now), wins: newWindows()}
	if !opts.LazyColumns {
		if c.podSorts, err = podSorts(opts.PodSortIndexes); err != nil {
			return nil, fmt.Errorf("pod sort indexes: %w", err)
		}
	}
	if !opts.IPHistory.Off {
		if c.history, err = ipowner.NewHistory(opts.IPHistory, opts.Now); err != nil {
			return nil, err
		}
	}
	for _, rc := range resources {
		if _, ok := ownerKind(rc.Resource); ok && c.mirror == nil {
			st := opts.Streams.withDefaults()
			c.mirror = ipowner.NewMirror(opts.Now, ipowner.MirrorOptions{HistorySize: st.HistorySize, HistoryAge: st.HistoryAge,
				BookmarkInterval: st.BookmarkInterval})
		}
	}
	for _, rc := range resources {
		r, err := c.newResourceCache(client, rc)
		if err != nil {
			return nil, err
		}
		c.resources = append(c.resources, r)
	}
	c.indexNames()
	c.linkCRDs()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the client of CRDs: %w", err)
	}
	c.addCRDWatches(dyn)
	c.attachOwnerTable()
	return c, nil
}

func (c *Cache) newResourceCache(client *apiClient, cr Configured) (*resourceCache, error) {
	r := &resourceCache{res: cr.Resource, spec: cr.Spec, indexes: map[string]indexers.Spec{}, opts: &c.opts,
		broker: newBroker(c.opts.Now, c.opts.Streams), orders: newOrders(c.opts.Now)}
	r.orders.eased = c.asks.eased
	idx := toolscache.Indexers{nsIndex: namespaceIndexFunc}
	sames := map[string]sameValues{nsIndex: sameNamespace}
	for _, s := range cr.Spec.Indexes {
		s = s.Normalized()
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("resource %s: %w", cr.Resource.Name, err)
		}
		r.indexes[s.Name] = s
		addIndex(idx, sames, s)
	}
	r.shape = Shape{APIVersion: cr.Resource.APIVersion(), Kind: cr.Resource.Kind, Drop: dropPaths(cr.Resource, cr.Spec)}
	namespaces := cr.Spec.Namespaces
	if len(namespaces) == 0 || !cr.Resource.Namespaced {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		sh := &shard{namespace: ns, conn: newConnState(c.opts.Now), ips: c.ipFeed(cr.Resource), index: newValueIndexes(idx, sames, r.broker.stored)}
		sh.prep = newListPrep(sh.index, sh.ips)
		lw := &listWatch{client: client, res: &r.res, namespace: ns, shape: r.shape,
			labelSelector: cr.Spec.LabelSelector, fieldSelector: cr.Spec.FieldSelector, conn: sh.conn,
			listTimeout: c.opts.ListTimeout, idleTimeout: c.opts.WatchIdleTimeout, prep: sh.prep}
		store, ctrl := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
			ListerWatcher: lw,
			ObjectType:    &Object{},
			Handler:       sh.eventHandler(c.opts.Now, r.broker, r.orders),
			ResyncPeriod:  cr.Spec.Resync,
		})
		sh.informer = informer{Indexer: indexedStore{Store: store, valueIndexes: sh.index}, Controller: ctrl}
		r.shards = append(r.shards, sh)
	}
	return r, nil
}

// indexNames lets a resource be addressed by its URL name, plural,
// plural.group, singular, kind and short names; the first resource to claim
// an alias keeps it.
func (c *Cache) indexNames() {
	for _, r := range c.resources {
		c.byName[r.res.Name] = r
	}
	for _, r := range c.resources {
		aliases := append([]string{r.res.Plural, r.res.GroupResource(), r.res.Singular, strings.ToLower(r.res.Kind)}, r.res.ShortNames...)
		for _, a := range aliases {
			if _, taken := c.byName[a]; a != "" && !taken {
				c.byName[a] = r
			}
		}
	}
}

// Start runs every informer until ctx is cancelled, then waits for them to
// stop. It returns at once if called twice.
func (c *Cache) Start(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return nil
	}
	c.wins.ctx.Store(&ctx)
	var wg sync.WaitGroup
	if c.history != nil && c.history.Persistent() {
		wg.Go(func() { c.history.Run(ctx) })
		wg.Go(func() {
			if c.WaitForSync(ctx) {
				c.history.Reconcile()
			}
		})
	}
	if c.mirror != nil {
		wg.Go(func() { c.mirror.Run(ctx) })
	}
	if !c.opts.LazyColumns {
		for _, r := range c.resources {
			r.orders.expectStanding(renderedSorts(c.standing(r)))
			if r.columnSchema() != nil {
				r.orders.expectFirstPass()
			}
		}
		wg.Go(func() { c.warmColumns(ctx) })
	}
	for _, r := range c.resources {
		if r.crdWatch != nil {
			wg.Go(func() { r.crdWatch.run(ctx, c.opts.Logger) })
		}
		wg.Go(func() { r.broker.run(ctx) })
		// The reflector's messages name the resource (the informer
		// knows only *cache.Object).
		ctx := klog.NewContext(ctx, klog.FromContext(ctx).WithValues("resource", r.res.GroupResource()))
		for _, sh := range r.shards {
			wg.Go(func() { sh.informer.RunWithContext(ctx) })
		}
	}
	wg.Wait()
	// A list the stopped handler was handing on never reaches its last
	// object: its feed ahead ends here rather than wait for it.
	for _, r := range c.resources {
		for _, sh := range r.shards {
			if f := sh.feeding.Load(); f != nil {
				f.close()
			}
		}
	}
	return nil
}

// crdPoll is how often WaitForSync looks whether the CRDs followed have
// been read (one GET each, nearly always done before the lists).
const crdPoll = 10 * time.Millisecond

// WaitForSync blocks until every informer has synced or ctx ends. It reports
// whether everything synced. It waits on each informer's queue, which
// says when its initial list has been handed to the handler (client-go's
// WaitFor), rather than looking every 100 ms as WaitForCacheSync does:
// what waits on it (the start-up heap floor's release, the readiness
// notification) follows the sync at once. A shard whose initial list is
// fed to the address feed ahead (feedAhead) has synced once that is done.
func (c *Cache) WaitForSync(ctx context.Context) bool {
	var synced []toolscache.DoneChecker
	var settled []func() bool
	for _, r := range c.resources {
		for _, sh := range r.shards {
			synced = append(synced, sh.informer.HasSyncedChecker())
		}
		if r.crdWatch != nil {
			settled = append(settled, r.crdWatch.settled)
		}
	}
	if !toolscache.WaitFor(ctx, "", synced...) {
		return false
	}
	// A feed ahead starts with its list's first object, before the
	// informer has synced, and ends after it.
	for _, r := range c.resources {
		for _, sh := range r.shards {
			if f := sh.feeding.Load(); f != nil {
				select {
				case <-f.done:
				case <-ctx.Done():
					return false
				}
			}
		}
	}
	err := wait.PollUntilContextCancel(ctx, crdPoll, true, func(context.Context) (bool, error) {
		for _, ok := range settled {
			if !ok() {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

func (c *Cache) resource(name string) (*resourceCache, error) {
	r, ok := c.byName[name]
	if !ok {
		r, ok = c.byName[strings.ToLower(name)]
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q (configured: %s)", ErrUnknownResource, text.Truncate(name, 64), strings.Join(c.names(), ", "))
	}
	return r, nil
}

func (c *Cache) names() []string {
	out := make([]string, len(c.resources))
	for i, r := range c.resources {
		out[i] = r.res.Name
	}
	return out
}

// eventHandler keeps the shard's event counts and time and feeds the
// resource's broker. It is the one handler registered on the informer:
// stream subscribers never get a client-go handler of their own (each
// would buffer without bound), and the resource's ordered indexes are
// kept by it, first: an event a stream or the counts show is in them.
// Nothing in it blocks.
func (sh *shard) eventHandler(now func() time.Time, b *broker, ord *orders) toolscache.ResourceEventHandler {
	touch := func() { sh.lastEvent.Store(now().UnixNano()) }
	feed := b.handler()
	wait := func() {
		if hold := sh.hold.Load(); hold != nil {
			(*hold)()
		}
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			wait()
			o := handlerObject(obj)
			po := sh.prep.take(o, initial)
			sh.index.set(o, po)
			ord.change(nil, o)
			feed.OnAdd(obj, initial)
			sh.feedAdd(obj, initial, po)
			sh.added.Add(1)
			touch()
		},
		UpdateFunc: func(old, cur any) {
			if o, ok := old.(*Object); ok && o == cur {
				return // a resync, not an event
			}
			wait()
			po := sh.prep.take(handlerObject(cur), false)
			sh.index.set(handlerObject(cur), po)
			ord.change(handlerObject(old), handlerObject(cur))
			feed.OnUpdate(old, cur)
			sh.feedUpdate(old, cur, po)
			sh.modified.Add(1)
			touch()
		},
		DeleteFunc: func(obj any) {
			wait()
			sh.index.remove(handlerObject(obj))
			ord.change(handlerObject(obj), nil)
			feed.OnDelete(obj)
			sh.feedRemove(obj)
			sh.deleted.Add(1)
			touch()
		},
	}
}

func namespaceIndexFunc(obj any) ([]string, error) {
	switch o := obj.(type) {
	case *Object:
		return []string{o.namespace}, nil
	case *inList:
		return []string{o.namespace}, nil
	}
	return nil, nil
}

// addIndex adds the function of index s and its sameValues to idx and
// sames.
func addIndex(idx toolscache.Indexers, sames map[string]sameValues, s indexers.Spec) {
	root, f := s.Rooted()
	idx[s.Name] = objectIndexFunc(root, f)
	sames[s.Name] = sameMembers(root, s.Members())
}

// objectIndexFunc runs f on the member root of each object (see
// indexers.Spec.Rooted), or on the whole object when root is "".
func objectIndexFunc(root string, f indexers.DocFunc) toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		switch o := obj.(type) {
		case *Object:
			return o.indexValues(root, f), nil
		case *inList:
			return o.indexValues(root, f), nil
		}
		return nil, nil
	}
}
