package cache

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/ipowner"
)

// The oracle of the owner table the handler keeps: a table built from
// scratch out of what the informers' stores hold now, each object read
// again. They agree once the handler has seen every event the stores
// have: the table is kept on every add, update and delete (ipowner's
// TestOwnerTableProperty holds the table itself to a plain scan).

// storeObjects lists the objects of r's informers' stores; nil for nil.
func storeObjects(r *resourceCache) []*Object {
	if r == nil {
		return nil
	}
	var out []*Object
	for _, sh := range r.shards {
		for _, it := range sh.informer.GetStore().List() {
			out = append(out, it.(*Object))
		}
	}
	return out
}

// ScanAddress answers q as LookupAddress does (q.At zero), from a table
// built from the stores instead of the one the handler keeps.
func (c *Cache) ScanAddress(q ipowner.Query) (IPLookup, error) {
	a := c.AddressLookups()
	var kinds []ipowner.Kind
	var fed []*resourceCache
	for _, r := range []*resourceCache{a.pods, a.services, a.nodes} {
		if r != nil {
			kind, _ := ownerKind(r.res)
			kinds, fed = append(kinds, kind), append(fed, r)
		}
	}
	scan := *a
	scan.c = &Cache{owners: ipowner.NewTable[*Object](kinds...)}
	for _, r := range fed {
		kind, _ := ownerKind(r.res)
		for _, o := range storeObjects(r) {
			scan.c.owners.Set(holdingOf(kind, o, o, false), o)
		}
	}
	var out IPLookup
	err := scan.LookupInto(q, &out)
	return out, err
}

// OwnerTableAddresses lists the addresses the owner table holds.
func (c *Cache) OwnerTableAddresses() []string { return c.owners.Addresses() }

// StoreAddresses lists every address an object of the stores holds, as
// the lookups count them.
func (c *Cache) StoreAddresses() []string {
	a := c.AddressLookups()
	var out []string
	for _, o := range storeObjects(a.pods) {
		out = append(out, indexers.PodIPsOf(o.doc("status"))...)
	}
	for _, r := range []*resourceCache{a.services, a.nodes} {
		for _, o := range storeObjects(r) {
			kind, _ := ownerKind(r.res)
			for _, h := range holdingOf(kind, o, o, false).Held {
				out = append(out, h.IP)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// DiffAnswers describes how two answers differ, "" when they do not: every
// member, the holders' objects by identity and the encoding.
func DiffAnswers(got, want IPLookup) string {
	g, w := got, want
	g.Freshness, w.Freshness = Freshness{}, Freshness{} // read at another moment
	g.Items, w.Items, g.ServiceItems, w.ServiceItems, g.NodeItems, w.NodeItems = nil, nil, nil, nil, nil, nil
	genc, wenc := g.AppendHolders(nil), w.AppendHolders(nil)
	g.Answer, w.Answer = ipowner.Answer[*Object]{IP: g.IP, Match: g.Match, Pods: g.Pods, Services: g.Services, Nodes: g.Nodes,
		Via: g.Via, Port: g.Port, History: g.History}, ipowner.Answer[*Object]{IP: w.IP, Match: w.Match, Pods: w.Pods,
		Services: w.Services, Nodes: w.Nodes, Via: w.Via, Port: w.Port, History: w.History} // without their encodings
	if !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("\n got %+v\nwant %+v", g, w)
	}
	for _, items := range [][2][]*Object{{got.Items, want.Items}, {got.ServiceItems, want.ServiceItems}, {got.NodeItems, want.NodeItems}} {
		if !slices.Equal(items[0], items[1]) { // the same objects, not equal ones
			return fmt.Sprintf("objects %v, want %v", keys(items[0]), keys(items[1]))
		}
	}
	if string(genc) != string(wenc) {
		return fmt.Sprintf("encoded %s, want %s", genc, wenc)
	}
	return ""
}

func keys(objs []*Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Key()+"@"+o.resourceVersion+"/"+o.uid)
	}
	return out
}
