package cache

import (
	"fmt"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/ipowner"
)

// Which cached resources answer who holds an address, and the answers
// with the resources and freshness they came from. What the answers are
// is ipowner's: the cache feeds it (addresses_feed.go) and asks.

// IPLookup is an answer about an address (ipowner.Answer, its objects the
// cache's) with what it was answered from: Resource is the pods resource
// (the first configured of pods, services, nodes); ServiceResource and
// NodeResource are those of the Services and Nodes, zero when they are
// not cached.
type IPLookup struct {
	ipowner.Answer[*Object]
	Resource                      Resource
	ServiceResource, NodeResource Resource
	Freshness                     Freshness
}

// ownerKind tells which of the kinds that hold addresses r is.
func ownerKind(r Resource) (ipowner.Kind, bool) {
	if r.Group != "" {
		return 0, false
	}
	return ipowner.KindOf(r.Plural)
}

// attachOwnerTable makes the owner table and has the resources the
// lookups answer with feed it: the pods resource with a podIP index (the
// one podIPIndex picks), the Services and the nodes.
func (c *Cache) attachOwnerTable() {
	var feeding []*resourceCache
	var kinds []ipowner.Kind
	for _, kind := range ipowner.Kinds {
		if r := c.answering(kind); r != nil {
			feeding, kinds = append(feeding, r), append(kinds, kind)
		}
	}
	c.owners = ipowner.NewTable[*Object](kinds...)
	for _, r := range feeding {
		for _, sh := range r.shards {
			sh.ips.owners = c.owners
		}
	}
}

// answering returns the cached resource the lookups of kind answer from
// (for pods, the one with a podIP index: podIPIndex), or nil when none
// does.
func (c *Cache) answering(kind ipowner.Kind) *resourceCache {
	if kind == ipowner.Pod {
		pods, _, _ := c.podIPIndex()
		return pods
	}
	return c.ownerResource(kind)
}

// ownerResource returns the cached resource of kind, or nil.
func (c *Cache) ownerResource(kind ipowner.Kind) *resourceCache {
	for _, r := range c.resources {
		if k, ok := ownerKind(r.res); ok && k == kind {
			return r
		}
	}
	return nil
}

func (c *Cache) podIPIndex() (*resourceCache, string, error) {
	for _, r := range c.resources {
		if r.res.Group != "" || r.res.Plural != "pods" {
			continue
		}
		for _, s := range r.spec.Indexes { // in configuration order: the first is the one, every time
			if s.Normalized().Type == indexers.PodIP {
				return r, s.Name, nil
			}
		}
	}
	return nil, "", fmt.Errorf("%w: IP lookups need the pods resource with an index of type podIP", ErrUnknownIndex)
}

// IPResources returns the resources that answer IP lookups (see
// LookupAddress), as configured: pods with a podIP index, Services,
// Nodes.
func (c *Cache) IPResources() []Resource {
	var out []Resource
	for _, kind := range ipowner.Kinds {
		if r := c.answering(kind); r != nil {
			out = append(out, r.res)
		}
	}
	return out
}

// LookupAddress answers q: every object that holds the address now (pods,
// Services, Nodes, as far as they are cached), or, with q.At, who held it
// then (the history). Which kinds answer follows the configuration. The
// answer's own errors are ipowner's (ErrNotFound, ErrInvalid,
// ErrBeforeHistory); the cache adds ErrUnknownIndex when nothing that
// holds addresses is cached and ErrNotSynced before it has synced. Safe
// for concurrent use.
func (c *Cache) LookupAddress(q ipowner.Query) (IPLookup, error) {
	var a AddressLookups // not allocated: it lives as long as this call
	c.prepareLookups(&a)
	var out IPLookup
	err := a.LookupInto(q, &out)
	return out, err
}

// AddressLookups answers many queries as LookupAddress does, for one
// batch: which resources answer, whether they have synced and their
// freshness are read once, when it is made, not per address. Safe for
// concurrent use; meant to live as long as one request.
type AddressLookups struct {
	c                     *Cache
	pods, services, nodes *resourceCache
	noneErr, notSynced    error
	out                   IPLookup // the fields every answer starts with
}

// AddressLookups prepares lookups for one batch (see AddressLookups).
func (c *Cache) AddressLookups() *AddressLookups {
	a := &AddressLookups{}
	c.prepareLookups(a)
	return a
}

func (c *Cache) prepareLookups(a *AddressLookups) {
	a.c = c
	a.pods, a.services, a.nodes = c.answering(ipowner.Pod), c.answering(ipowner.Service), c.answering(ipowner.Node)
	var first *resourceCache
	for _, r := range []*resourceCache{a.pods, a.services, a.nodes} {
		if first == nil {
			first = r
		}
		if r != nil && !r.synced() && a.notSynced == nil {
			a.notSynced = fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
		}
	}
	if a.services != nil {
		a.out.ServiceResource = a.services.res
	}
	if a.nodes != nil {
		a.out.NodeResource = a.nodes.res
	}
	if first == nil {
		a.noneErr = fmt.Errorf("%w: IP lookups need pods with an index of type podIP, services or nodes", ErrUnknownIndex)
		return
	}
	a.out.Resource, a.out.Freshness = first.res, first.freshness()
}

// LookupInto is LookupAddress answering in *out, which it overwrites
// whole: a batch reuses one answer rather than copying a new one per
// address.
func (a *AddressLookups) LookupInto(q ipowner.Query, out *IPLookup) error {
	if !q.At.IsZero() {
		return a.lookupAt(q, out)
	}
	if a.noneErr != nil {
		*out = IPLookup{}
		return a.noneErr
	}
	*out = a.out
	if a.notSynced != nil {
		ip, err := ipowner.Normalize(q.IP)
		out.IP = ip
		out.ServiceResource, out.NodeResource = Resource{}, Resource{}
		if err != nil {
			return err
		}
		return a.notSynced
	}
	err := a.c.owners.LookupInto(q, &out.Answer)
	if err != nil && out.IP == "" { // not an address
		out.ServiceResource, out.NodeResource = Resource{}, Resource{}
	}
	return err
}

// lookupAt answers q from the history, with the resources that answer
// (the pods resource's freshness, if any) whatever the outcome.
func (a *AddressLookups) lookupAt(q ipowner.Query, out *IPLookup) error {
	*out = a.out
	if a.pods == nil { // an answer at a moment names the pods resource only
		out.Resource, out.Freshness = Resource{}, Freshness{}
	}
	return ipowner.LookupAt(a.c.history, q, &out.Answer)
}

// IPHistoryStats describes the address history, for metrics; ok is false
// when the history is off. Safe for concurrent use.
func (c *Cache) IPHistoryStats() (ipowner.HistoryStats, bool) {
	if c.history == nil {
		return ipowner.HistoryStats{}, false
	}
	return c.history.Stats(), true
}
