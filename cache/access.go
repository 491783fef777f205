package cache

import (
	"fmt"
	"slices"
	"time"
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

// Restrict keeps the holders of the lookup that allowed accepts (res is
// the resource of the holder, namespace "" for Nodes) and classifies the
// address again from those alone: a caller is told about the objects it
// may see, and nothing about the others, not even that they exist. With
// nobody left it returns the ErrNotFound LookupIP gives for an address
// nobody has.
func (l IPLookup) Restrict(allowed func(res Resource, namespace string) bool) (IPLookup, error) {
	out := l
	out.Pods, out.Items, out.Services, out.ServiceItems, out.Nodes, out.NodeItems = nil, nil, nil, nil, nil, nil
	for i, p := range l.Pods {
		if allowed(l.Resource, p.Namespace) {
			out.Pods = append(out.Pods, p)
			out.Items = append(out.Items, l.Items[i])
		}
	}
	for i, s := range l.Services {
		if allowed(l.ServiceResource, s.Namespace) {
			out.Services = append(out.Services, s)
			out.ServiceItems = append(out.ServiceItems, l.ServiceItems[i])
		}
	}
	for i, n := range l.Nodes {
		if allowed(l.NodeResource, "") {
			out.Nodes = append(out.Nodes, n)
			out.NodeItems = append(out.NodeItems, l.NodeItems[i])
		}
	}
	if l.History != nil {
		h := *l.History
		h.Owners = nil
		for _, o := range l.History.Owners {
			if allowed(l.kindResource(o.Kind), o.Namespace) {
				h.Owners = append(h.Owners, o)
			}
		}
		out.History = &h
		if out.Via == "" {
			out.Match = classifyOwners(h.Owners)
		}
		if len(h.Owners) == 0 {
			return out, fmt.Errorf("nobody held %s at %s: %w", l.IP, h.At.UTC().Format(time.RFC3339Nano), ErrNotFound)
		}
		return out, nil
	}
	if out.Via == "" {
		out.Match = classifyAll(out.Pods, len(out.Services), len(out.Nodes))
	}
	if len(out.Pods)+len(out.Services)+len(out.Nodes) == 0 {
		return out, l.notFound() // as LookupIP says it: nothing leaks
	}
	return out, nil
}

// Holder is one object of an answer, as authorization sees it.
type Holder struct {
	Resource  Resource
	Namespace string
}

// Holders lists the resource and namespace of every holder in the answer.
func (l IPLookup) Holders() []Holder {
	var out []Holder
	if l.History != nil {
		for _, o := range l.History.Owners {
			out = append(out, Holder{l.kindResource(o.Kind), o.Namespace})
		}
		return out
	}
	for _, p := range l.Pods {
		out = append(out, Holder{l.Resource, p.Namespace})
	}
	for _, s := range l.Services {
		out = append(out, Holder{l.ServiceResource, s.Namespace})
	}
	for range l.Nodes {
		out = append(out, Holder{l.NodeResource, ""})
	}
	return out
}

// Namespaces lists, sorted and once each, the namespaces of the holders
// of resource res.
func (l IPLookup) Namespaces(res Resource) []string {
	var out []string
	for _, h := range l.Holders() {
		if h.Resource.Name == res.Name {
			out = append(out, h.Namespace)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
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
