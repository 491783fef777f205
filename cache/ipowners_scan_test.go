package cache

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"

	"github.com/kubeindex/kubeindex/indexers"
)

// The oracle of the owner table: the holders of an address found by
// scanning every object of the stores and re-reading its JSON, as the
// lookups did before the table (through the informers' indexes).

// scanHolders finds the holders of ip among pods, services and nodes (any
// may be nil), ordered as IPLookup says, with their ports.
func scanHolders(ip string, pods, services, nodes []*Object) IPLookup {
	var l IPLookup
	for _, o := range pods {
		if slices.Contains(indexers.PodIPsOf(o.doc("status")), ip) {
			l.Pods, l.Items = append(l.Pods, summarisePod(o)), append(l.Items, o)
		}
	}
	if len(l.Pods) > 1 {
		sortPods(l.Pods, l.Items)
	}
	for i, p := range l.Pods {
		var ports []indexers.Port
		if p.Active && p.HostNetwork {
			ports = indexers.PodPorts(l.Items[i].doc("spec"))
		}
		l.podPorts = append(l.podPorts, ports)
	}
	services = slices.SortedFunc(slices.Values(services), compareKeys)
	for _, o := range services {
		for _, h := range heldBy("services", o) {
			if h.IP == ip {
				l.Services = append(l.Services, IPService{Namespace: o.namespace, Name: o.name, UID: o.uid, Role: h.Role})
				l.ServiceItems = append(l.ServiceItems, o)
				l.servicePorts = append(l.servicePorts, indexers.ServicePorts(o.doc("spec")))
			}
		}
	}
	nodes = slices.SortedFunc(slices.Values(nodes), compareKeys)
	for _, o := range nodes {
		for _, h := range heldBy("nodes", o) {
			if h.IP == ip {
				l.Nodes = append(l.Nodes, IPNode{Name: o.name, UID: o.uid, Role: h.Role})
				l.NodeItems = append(l.NodeItems, o)
			}
		}
	}
	return l
}

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

// ScanAddress answers q as LookupAddress does (q.At zero), the holders
// found by scanning the informers' stores instead of the owner table.
func (c *Cache) ScanAddress(q IPQuery) (IPLookup, error) {
	a := c.AddressLookups()
	if a.noneErr != nil {
		return IPLookup{}, a.noneErr
	}
	norm, ok := indexers.NormalizeIP(q.IP)
	if !ok {
		return IPLookup{Resource: a.out.Resource, Freshness: a.out.Freshness}, fmt.Errorf("%w: %q is not an IPv4 or IPv6 address", ErrInvalid, q.IP)
	}
	out := scanHolders(norm, storeObjects(a.pods), storeObjects(a.services), storeObjects(a.nodes))
	out.IP, out.Resource, out.Freshness = norm, a.out.Resource, a.out.Freshness
	out.ServiceResource, out.NodeResource = a.out.ServiceResource, a.out.NodeResource
	err := out.finish(q)
	return out, err
}

// OwnerTableAddresses lists the addresses the owner table holds.
func (c *Cache) OwnerTableAddresses() []string {
	c.owners.mu.RLock()
	defer c.owners.mu.RUnlock()
	var out []string
	for _, h := range c.owners.byIP {
		out = append(out, h.ip)
	}
	return out
}

// StoreAddresses lists every address an object of the stores holds, as
// the lookups count them.
func (c *Cache) StoreAddresses() []string {
	a := c.AddressLookups()
	var out []string
	for _, o := range storeObjects(a.pods) {
		out = append(out, indexers.PodIPsOf(o.doc("status"))...)
	}
	for _, kind := range []string{"services", "nodes"} {
		r := a.services
		if kind == "nodes" {
			r = a.nodes
		}
		for _, o := range storeObjects(r) {
			out = append(out, indexers.HeldIPs(heldBy(kind, o))...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// DiffAnswers describes how two answers differ, "" when they do not: every
// member, the holders' objects by identity, the ports and the encoding.
func DiffAnswers(got, want IPLookup) string {
	if !reflect.DeepEqual(got.Port, want.Port) {
		return fmt.Sprintf("port %+v, want %+v", got.Port, want.Port)
	}
	g, w := got, want
	g.Port, w.Port, g.encoded, w.encoded = nil, nil, nil, nil
	g.Freshness, w.Freshness = Freshness{}, Freshness{} // read at another moment
	g.Items, w.Items, g.ServiceItems, w.ServiceItems, g.NodeItems, w.NodeItems = nil, nil, nil, nil, nil, nil
	if !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("\n got %+v\nwant %+v", g, w)
	}
	for _, items := range [][2][]*Object{{got.Items, want.Items}, {got.ServiceItems, want.ServiceItems}, {got.NodeItems, want.NodeItems}} {
		if !slices.Equal(items[0], items[1]) { // the same objects, not equal ones
			return fmt.Sprintf("objects %v, want %v", keys(items[0]), keys(items[1]))
		}
	}
	if enc, wantEnc := got.AppendHolders(nil), want.AppendHolders(nil); string(enc) != string(wantEnc) {
		return fmt.Sprintf("encoded %s, want %s", enc, wantEnc)
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

// tableHolders is what the table answers for ip, as an IPLookup.
func tableHolders(t *ownerTable, ip string) IPLookup {
	var l IPLookup
	if h := t.holders(netip.MustParseAddr(ip)); h != nil {
		l.setHolders(h)
	}
	return l
}
