package cache

import (
	"slices"
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

// keepVisible keeps the holders visible accepts (see IPQuery.Visible).
func (l *IPLookup) keepVisible(visible func(res Resource, namespace string) bool) {
	pods, items := l.Pods[:0], l.Items[:0]
	for i, p := range l.Pods {
		if visible(l.Resource, p.Namespace) {
			pods, items = append(pods, p), append(items, l.Items[i])
		}
	}
	services, serviceItems := l.Services[:0], l.ServiceItems[:0]
	for i, s := range l.Services {
		if visible(l.ServiceResource, s.Namespace) {
			services, serviceItems = append(services, s), append(serviceItems, l.ServiceItems[i])
		}
	}
	nodes, nodeItems := l.Nodes[:0], l.NodeItems[:0]
	if len(l.Nodes) > 0 && visible(l.NodeResource, "") {
		nodes, nodeItems = l.Nodes, l.NodeItems
	}
	l.Pods, l.Items, l.Services, l.ServiceItems, l.Nodes, l.NodeItems = nilIfEmpty(pods), nilIfEmpty(items),
		nilIfEmpty(services), nilIfEmpty(serviceItems), nilIfEmpty(nodes), nilIfEmpty(nodeItems)
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
