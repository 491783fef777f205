package cache

import (
	"slices"

	"github.com/kubeindex/kubeindex/indexers"
)

// What the HTTP layer needs to restrict answers to what a caller may read.
// The cache itself knows nothing of users: it resolves names, enumerates
// namespaces and filters answers by namespace.

// Resolve returns the resource a name (any alias List accepts) stands for.
func (c *Cache) Resolve(name string) (Resource, error) {
	r, err := c.resource(name)
	if err != nil {
		return Resource{}, err
	}
	return r.res, nil
}

// Namespaces returns every namespace the cache knows of, sorted: those
// holding any cached object, the names of cached Namespace objects, and
// the namespaces resources are configured to watch. A namespace with no
// cached object and no Namespace object is not known. Safe for concurrent
// use; the cost is one pass over the namespace index of every informer.
func (c *Cache) Namespaces() []string {
	set := map[string]struct{}{}
	for _, r := range c.resources {
		for _, ns := range r.spec.Namespaces {
			set[ns] = struct{}{}
		}
		namespaceObjects := r.res.Group == "" && r.res.Plural == "namespaces"
		for _, sh := range r.shards {
			idx := sh.informer.GetIndexer()
			if namespaceObjects {
				for _, k := range idx.ListKeys() {
					set[k] = struct{}{}
				}
				continue
			}
			for _, ns := range idx.ListIndexFuncValues(nsIndex) {
				set[ns] = struct{}{}
			}
		}
	}
	delete(set, "") // cluster-scoped objects
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// NamespacesOf returns the namespaces holding cached objects of resource,
// sorted: the only ones where a list of it finds anything. A namespace
// no object of resource is in is left out, even when Namespaces knows it.
// Safe for concurrent use; the cost is one pass over the resource's
// namespace index.
func (c *Cache) NamespacesOf(resource string) ([]string, error) {
	r, err := c.resource(resource)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sh := range r.shards {
		out = append(out, sh.informer.GetIndexer().ListIndexFuncValues(nsIndex)...)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > 0 && out[0] == "" { // cluster-scoped objects
		out = out[1:]
	}
	return out, nil
}

// IPResources returns the resources that answer IP lookups (see
// LookupAddress), as configured: pods with a podIP index, Services,
// Nodes.
func (c *Cache) IPResources() []Resource {
	var out []Resource
	if pods, _, err := c.podIPIndex(); err == nil {
		out = append(out, pods.res)
	}
	for _, kind := range []string{"services", "nodes"} {
		if r := c.ownerResource(kind); r != nil {
			out = append(out, r.res)
		}
	}
	return out
}

// keepVisible keeps the holders visible accepts (see IPQuery.Visible). The
// lists may be shared (IPLookup): a list with a hidden holder is copied,
// never filtered in place.
func (l *IPLookup) keepVisible(visible func(res Resource, namespace string) bool) {
	pods, services, nodes := len(l.Pods), len(l.Services), len(l.Nodes)
	l.Pods, l.Items, l.podPorts = keepIf(l.Pods, l.Items, l.podPorts, func(p IPPod) bool { return visible(l.Resource, p.Namespace) })
	l.Services, l.ServiceItems, l.servicePorts = keepIf(l.Services, l.ServiceItems, l.servicePorts,
		func(s IPService) bool { return visible(l.ServiceResource, s.Namespace) })
	if len(l.Nodes) > 0 && !visible(l.NodeResource, "") {
		l.Nodes, l.NodeItems = nil, nil
	}
	if len(l.Pods) != pods || len(l.Services) != services || len(l.Nodes) != nodes {
		l.encoded = nil
	}
}

// keepIf returns the holders keep accepts with their objects and ports
// (ports may be nil), the same slices when it accepts all, nil when none.
func keepIf[T any](xs []T, items []*Object, ports [][]indexers.Port, keep func(T) bool) ([]T, []*Object, [][]indexers.Port) {
	first := slices.IndexFunc(xs, func(x T) bool { return !keep(x) })
	if first < 0 {
		return xs, items, ports
	}
	outX, outItems := slices.Clone(xs[:first:first]), slices.Clone(items[:first:first])
	var outPorts [][]indexers.Port
	if ports != nil {
		outPorts = slices.Clone(ports[:first:first])
	}
	for i := first + 1; i < len(xs); i++ {
		if keep(xs[i]) {
			outX, outItems = append(outX, xs[i]), append(outItems, items[i])
			if ports != nil {
				outPorts = append(outPorts, ports[i])
			}
		}
	}
	return nilIfEmpty(outX), nilIfEmpty(outItems), nilIfEmpty(outPorts)
}

// nilIfEmpty keeps an answer without holders of a kind as one that never
// had any (an encoder tells nil from empty).
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func (l IPLookup) kindResource(kind string) Resource {
	switch kind {
	case "Service":
		return l.ServiceResource
	case "Node":
		return l.NodeResource
	}
	return l.Resource
}
