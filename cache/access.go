package cache

import (
	"fmt"
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

// Restrict keeps the pods of the lookup whose namespace allowed accepts,
// and classifies the address again from those alone: a caller is told
// about the pods it may see, and nothing about the others, not even that
// they exist. With no pod left it returns the ErrNotFound LookupIP gives
// for an address nobody has.
func (l IPLookup) Restrict(allowed func(namespace string) bool) (IPLookup, error) {
	out := l
	out.Pods, out.Items = nil, nil
	for i, p := range l.Pods {
		if allowed(p.Namespace) {
			out.Pods = append(out.Pods, p)
			out.Items = append(out.Items, l.Items[i])
		}
	}
	out.Match = classify(out.Pods)
	if len(out.Pods) == 0 {
		return out, fmt.Errorf("no pod has IP %s: %w", l.IP, ErrNotFound) // as LookupIP says it: nothing leaks
	}
	return out, nil
}
