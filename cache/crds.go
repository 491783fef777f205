package cache

import (
	"context"
	"log/slog"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
)

// A custom resource's Table columns and field selectors are its CRD's.
// When the configuration caches customresourcedefinitions, the cache reads
// them there (fields_crd.go); otherwise it follows, for each custom
// resource it serves, that one CRD: a GET, then a watch of that name, which
// the API server authorizes with only get and watch on the CRD by name
// (RBAC resourceNames). Without that permission it says so once, and the
// resource gets what the API server prints for a CRD it cannot read:
// Name and Age (never the generic Created At), and field selectors on
// metadata only.

// CRDState is what the cache knows of the CRD of a resource.
type CRDState int32

const (
	// CRDPending: not read yet (the cache is not ready until it is).
	CRDPending CRDState = iota
	// CRDNone: the resource is not defined by a CRD (a built-in kind, or
	// an aggregated API's).
	CRDNone
	// CRDUnreadable: a custom resource whose CRD the cache may not read
	// (or could not yet).
	CRDUnreadable
	// CRDKnown: the CRD is held (CRD returns its JSON).
	CRDKnown
)

var crdGVR = schema.GroupVersionResource{Group: crdGroup, Version: "v1", Resource: crdPlural}

// crdWatch follows the CRD of one custom resource. Safe for concurrent
// use; run is called once.
type crdWatch struct {
	name   string // plural.group, as the CRD is named
	client dynamic.ResourceInterface
	// base is the client client was made from: a fake one in tests does
	// not speak watch lists, and says so.
	base  dynamic.Interface
	state atomic.Int32
	raw   atomic.Pointer[[]byte] // the CRD's JSON; nil until read, or once deleted
}

// mayBeCustom reports whether a resource of group may be served by a CRD:
// any group that is not one of Kubernetes' own (which client-go's scheme
// registers).
func mayBeCustom(group string) bool {
	return group != "" && !scheme.Scheme.IsGroupRegistered(group)
}

// addCRDWatches gives every resource that may be custom a crdWatch, unless
// the cache holds the CRDs anyway.
func (c *Cache) addCRDWatches(client dynamic.Interface) {
	for _, r := range c.resources {
		if r.crds != nil || !mayBeCustom(r.res.Group) || (r.res.Group == crdGroup && r.res.Plural == crdPlural) {
			continue
		}
		r.crdWatch = &crdWatch{name: r.res.Plural + "." + r.res.Group, client: client.Resource(crdGVR), base: client}
	}
}

func (w *crdWatch) settled() bool { return CRDState(w.state.Load()) != CRDPending }

// run reads the CRD, then follows it until ctx ends. A CRD that is not
// found is a resource served otherwise (nothing to follow); one that may
// not be read is logged once and not asked for again.
func (w *crdWatch) run(ctx context.Context, log *slog.Logger) {
	obj, err := w.client.Get(ctx, w.name, metav1.GetOptions{})
	switch {
	case err == nil:
		w.set(obj)
	case apierrors.IsNotFound(err):
		w.state.Store(int32(CRDNone))
		return
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		w.state.Store(int32(CRDUnreadable))
		log.Warn("cannot read the CRD of a cached custom resource: kubectl get prints Name and Age for it, "+
			"not its printer columns, and its field selectors are metadata.name and metadata.namespace only; "+
			"grant get and watch on customresourcedefinitions.apiextensions.k8s.io named "+w.name,
			"crd", w.name, "err", err)
		return
	default:
		w.state.Store(int32(CRDUnreadable))
		log.Warn("cannot read the CRD of a cached custom resource yet; trying again", "crd", w.name, "err", err)
	}
	selector := fields.OneTermEqualSelector("metadata.name", w.name).String()
	lw := &toolscache.ListWatch{
		// The list is a GET of the one CRD: get and watch by name are all
		// the permission asked for.
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			list := &unstructured.UnstructuredList{Object: map[string]any{}}
			obj, err := w.client.Get(ctx, w.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return list, nil
			}
			if err != nil {
				return nil, err
			}
			list.SetResourceVersion(obj.GetResourceVersion())
			list.Items = []unstructured.Unstructured{*obj}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return w.client.Watch(ctx, opts)
		},
	}
	_, ctrl := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		// A watch list (sendInitialEvents) where the client can; the GET
		// above as the list otherwise.
		ListerWatcher: toolscache.ToListWatcherWithWatchListSemantics(lw, w.base),
		ObjectType:    &unstructured.Unstructured{},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.set(obj) },
			UpdateFunc: func(_, obj any) { w.set(obj) },
			DeleteFunc: func(any) { w.raw.Store(nil) },
		},
	})
	ctrl.RunWithContext(ctx)
}

func (w *crdWatch) set(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	b, err := u.MarshalJSON()
	if err != nil {
		return
	}
	w.raw.Store(&b)
	w.state.Store(int32(CRDKnown))
}

// CRD returns the JSON of the CRD that defines resource (as List names
// it), and what the cache knows of it: CRDKnown with the JSON; CRDNone for
// a resource no CRD defines; CRDUnreadable or CRDPending otherwise (and
// for a known CRD since deleted, nil JSON with CRDKnown).
func (c *Cache) CRD(resource string) ([]byte, CRDState, error) {
	r, err := c.resource(resource)
	if err != nil {
		return nil, CRDNone, err
	}
	raw, state := r.crd()
	return raw, state, nil
}

func (r *resourceCache) crd() ([]byte, CRDState) {
	switch {
	case r.crds != nil:
		for _, sh := range r.crds.shards {
			if item, ok, _ := sh.informer.GetIndexer().GetByKey(r.res.Plural + "." + r.res.Group); ok {
				return item.(*Object).flat(), CRDKnown
			}
		}
		if !r.crds.synced() {
			return nil, CRDPending
		}
		return nil, CRDNone
	case r.crdWatch != nil:
		var raw []byte
		if p := r.crdWatch.raw.Load(); p != nil {
			raw = *p
		}
		return raw, CRDState(r.crdWatch.state.Load())
	default:
		return nil, CRDNone
	}
}
