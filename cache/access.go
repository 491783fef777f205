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
