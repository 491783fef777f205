package cache

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kubeindex/kubeindex/indexers"
)

// ownerTable answers "who holds this address now" for the lookups of now
// (LookupAddress, AddressLookups): for each address, its holders already
// in the order, shape and with the ports an IPLookup gives them. It is fed
// by the same one handler per shard as the history and the mirror
// (ipFeed), in the order that handler sees the events, and only by the
// resources the lookups answer with (the pods resource with a podIP index,
// the Services and the nodes; see Cache.attachOwnerTable).
//
// Why not the informers' indexes: a read there takes the store's lock,
// two map lookups and a new slice per shard, then the answer re-reads
// each object's JSON (phase, node, a node's or a Service's addresses);
// here a read is one map lookup under a read lock and allocates nothing,
// the entries being immutable and shared with the answers.
//
// Each object is known by its UID (kind and UID: a Service and a pod
// never share one, but nothing relies on it): an event about one UID
// replaces that UID's holdings only, so a late delete of an old owner
// never removes a newer owner of the same address, and an object
// recreated under the same name is a new owner. What an address answers is
// what a scan of the informers' stores answers, once the handler has seen
// the events the stores have (TestOwnerTableAgreesWithStores,
// TestOwnerTableProperty). Safe for concurrent use.
type ownerTable struct {
	mu    sync.RWMutex
	byIP  map[netip.Addr]*addrHolders
	byUID map[ownerID]*heldRecord
}

// ownerID names an object in the table: its kind ("pods", "services",
// "nodes") and UID, or its namespace/name when it has no UID.
type ownerID struct{ kind, uid string }

// heldRecord is what one object holds, as the lookups answer it.
type heldRecord struct {
	id  ownerID
	obj *Object
	// pod is a pod's summary; zero for Services and nodes.
	pod IPPod
	// held is each (address, role) once. A pod holds its podIPs whatever
	// its phase (the podIP index's values): completed pods answer too.
	held []indexers.Held
	// ports are those of an active hostNetwork pod or a Service (the
	// holders a port tells apart), nil otherwise.
	ports []indexers.Port
}

// addrHolders are the holders of one address, ordered as IPLookup says,
// each list with its objects and ports index for index; nil lists when
// there are none. Immutable once in the table: answers share the slices.
type addrHolders struct {
	ip           string // normalized (indexers.NormalizeIP)
	pods         []IPPod
	podItems     []*Object
	podPorts     [][]indexers.Port
	services     []IPService
	serviceItems []*Object
	servicePorts [][]indexers.Port
	nodes        []IPNode
	nodeItems    []*Object
	// encoded is IPLookup.AppendHolders of these lists, made by the first
	// lookup of the address (encoding): most addresses are never looked
	// up, and an encoding costs about as much memory as the rest of the
	// entry.
	encoded atomic.Pointer[[]byte]
	// records are the distinct objects holding the address (a Service
	// may hold it in two roles), in the lists' order, to rebuild from.
	records []*heldRecord
}

func newOwnerTable() *ownerTable {
	return &ownerTable{byIP: map[netip.Addr]*addrHolders{}, byUID: map[ownerID]*heldRecord{}}
}

// parseAddress reads an address as indexers.NormalizeIP does, into the
// table's key. norm is the normalized spelling when it costs nothing (an
// IPv4 address is its own), else "": then addressString, or the holders'
// ip, is it.
func parseAddress(v string) (addr netip.Addr, norm string, ok bool) {
	v = strings.TrimSpace(v)
	addr, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Addr{}, "", false
	}
	if addr.Is4() {
		return addr, v, true // ParseAddr takes IPv4 only in its canonical spelling
	}
	return addr.WithZone("").Unmap(), "", true
}

// addressString is the normalized spelling of what parseAddress read.
func addressString(addr netip.Addr, norm string) string {
	if norm != "" {
		return norm
	}
	return addr.String()
}

// holders returns the holders of ip (see parseAddress), nil when nobody
// holds it. The result is shared: read-only.
func (t *ownerTable) holders(ip netip.Addr) *addrHolders {
	t.mu.RLock()
	h := t.byIP[ip]
	t.mu.RUnlock()
	return h
}

// recordOf reads what o of kind holds from what the feed already read (h).
func recordOf(kind string, o *Object, h holding) *heldRecord {
	rec := &heldRecord{id: idOf(kind, o), obj: o, ports: h.ports}
	switch kind {
	case "pods":
		rec.pod = h.pod
		if rec.pod.Active {
			rec.held = h.held // the same podIPs, each once
		} else {
			rec.held = make([]indexers.Held, len(h.podIPs))
			for i, ip := range h.podIPs {
				rec.held[i] = indexers.Held{IP: ip, Role: indexers.RolePodIP}
			}
		}
		if !rec.pod.Active || !rec.pod.HostNetwork {
			rec.ports = nil
		}
	default:
		rec.held = h.held
	}
	return rec
}

func idOf(kind string, o *Object) ownerID {
	if o.uid == "" {
		return ownerID{kind, o.namespace + "/" + o.name}
	}
	return ownerID{kind, o.uid}
}

// set records that the object id now holds what rec says; rec nil: it
// was deleted. Only the addresses it held or holds are rebuilt.
func (t *ownerTable) set(id ownerID, rec *heldRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.byUID[id]
	if prev == nil && rec == nil {
		return
	}
	var touched []string
	for _, r := range []*heldRecord{prev, rec} {
		if r == nil {
			continue
		}
		for _, h := range r.held {
			if !slices.Contains(touched, h.IP) {
				touched = append(touched, h.IP)
			}
		}
	}
	for _, ip := range touched {
		addr, err := netip.ParseAddr(ip) // normalized when read: never fails
		if err != nil {
			continue
		}
		if h := t.byIP[addr].with(ip, id, rec); h == nil {
			delete(t.byIP, addr)
		} else {
			t.byIP[addr] = h
		}
	}
	if rec == nil {
		delete(t.byUID, id)
	} else {
		t.byUID[id] = rec
	}
}

// with returns the holders of ip once id holds what rec says there (rec
// nil: nothing), a new value: h is left as it is. nil when nobody does.
func (h *addrHolders) with(ip string, id ownerID, rec *heldRecord) *addrHolders {
	if h != nil && rec != nil {
		if i := slices.IndexFunc(h.records, func(r *heldRecord) bool { return r.id == id }); i >= 0 && sameAt(h.records[i], rec, ip) {
			return h.withObject(i, rec)
		}
	}
	var records []*heldRecord
	if h != nil {
		records = make([]*heldRecord, 0, len(h.records)+1)
		for _, r := range h.records {
			if r.id != id {
				records = append(records, r)
			}
		}
	}
	if rec != nil && slices.ContainsFunc(rec.held, func(e indexers.Held) bool { return e.IP == ip }) {
		records = append(records, rec)
	}
	if len(records) == 0 {
		return nil
	}
	slices.SortFunc(records, compareRecords)
	out := &addrHolders{ip: ip, records: records}
	for _, r := range records {
		for _, e := range r.held {
			if e.IP != ip {
				continue
			}
			o := r.obj
			switch r.id.kind {
			case "pods":
				out.pods = append(out.pods, r.pod)
				out.podItems = append(out.podItems, o)
				out.podPorts = append(out.podPorts, r.ports)
			case "services":
				out.services = append(out.services, IPService{Namespace: o.namespace, Name: o.name, UID: o.uid, Role: e.Role})
				out.serviceItems = append(out.serviceItems, o)
				out.servicePorts = append(out.servicePorts, r.ports)
			case "nodes":
				out.nodes = append(out.nodes, IPNode{Name: o.name, UID: o.uid, Role: e.Role})
				out.nodeItems = append(out.nodeItems, o)
			}
		}
	}
	return out
}

// encoding returns IPLookup.AppendHolders of h's lists, made once.
// Lookups racing to make it make the same bytes; one is kept.
func (h *addrHolders) encoding() []byte {
	if e := h.encoded.Load(); e != nil {
		return *e
	}
	e := appendHolders(nil, h.pods, h.services, h.nodes)
	h.encoded.CompareAndSwap(nil, &e)
	return *h.encoded.Load()
}

var kindRank = map[string]int{"pods": 0, "services": 1, "nodes": 2}

// compareRecords orders records as the answers list holders: pods first,
// as comparePods orders them, then Services, then nodes, by namespace and
// name (a Service's roles then follow its held order).
func compareRecords(a, b *heldRecord) int {
	if c := kindRank[a.id.kind] - kindRank[b.id.kind]; c != 0 {
		return c
	}
	if a.id.kind == "pods" {
		return comparePods(a.pod, b.pod)
	}
	return compareKeys(a.obj, b.obj)
}

// sameAt reports whether a and b, two versions of one object, answer the
// same about ip: the same summary, names, roles there and ports. The most
// common update (a pod's status changing elsewhere) is such a one.
func sameAt(a, b *heldRecord, ip string) bool {
	if a.pod != b.pod || a.obj.namespace != b.obj.namespace || a.obj.name != b.obj.name || a.obj.uid != b.obj.uid ||
		!slices.Equal(a.ports, b.ports) {
		return false
	}
	var ra, rb []indexers.Role
	for _, e := range a.held {
		if e.IP == ip {
			ra = append(ra, e.Role)
		}
	}
	for _, e := range b.held {
		if e.IP == ip {
			rb = append(rb, e.Role)
		}
	}
	return slices.Equal(ra, rb)
}

// withObject is h with records[i] replaced by rec, which answers the same
// (sameAt): the order, the summaries and the encoding stay, shared; only
// the objects change.
func (h *addrHolders) withObject(i int, rec *heldRecord) *addrHolders {
	out := &addrHolders{ip: h.ip, pods: h.pods, podPorts: h.podPorts, services: h.services,
		servicePorts: h.servicePorts, nodes: h.nodes}
	out.encoded.Store(h.encoded.Load())
	out.records = slices.Clone(h.records)
	out.records[i] = rec
	out.podItems, out.serviceItems, out.nodeItems = nil, nil, nil
	for _, r := range out.records {
		for _, e := range r.held {
			if e.IP != h.ip {
				continue
			}
			switch r.id.kind {
			case "pods":
				out.podItems = append(out.podItems, r.obj)
			case "services":
				out.serviceItems = append(out.serviceItems, r.obj)
			case "nodes":
				out.nodeItems = append(out.nodeItems, r.obj)
			}
		}
	}
	return out
}
