package ipowner

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Table answers "who holds this address now": for each address, its
// holders already in the order, shape and with the ports an Answer gives
// them, and the objects (O, opaque here) they are. It is fed by the
// cache's one handler per informer (Set, Remove), in the order that
// handler sees the events, by the resources the lookups answer with.
//
// Why not the informers' indexes: a read there takes the store's lock,
// two map lookups and a new slice per shard, then the answer re-reads
// each object's JSON (phase, node, a node's or a Service's addresses);
// here a read is one map lookup under a read lock and allocates nothing,
// the entries being immutable and shared with the answers.
//
// Each object is known by its kind and UID: an event about one UID
// replaces that UID's holdings only, so a late delete of an old owner
// never removes a newer owner of the same address, and an object
// recreated under the same name is a new owner. What an address answers
// is what a scan of everything fed answers (TestOwnerTableProperty).
// Safe for concurrent use.
type Table[O any] struct {
	// podsOnly: only pods feed the table (the error of an address nobody
	// holds is worded as it always was then).
	podsOnly bool

	mu    sync.RWMutex
	byIP  map[netip.Addr]*holders[O]
	byUID map[ownerID]*record[O]
}

// NewTable makes a table fed by objects of the given kinds.
func NewTable[O any](kinds ...Kind) *Table[O] {
	podsOnly := !slices.ContainsFunc(kinds, func(k Kind) bool { return k != Pod })
	return &Table[O]{podsOnly: podsOnly, byIP: map[netip.Addr]*holders[O]{}, byUID: map[ownerID]*record[O]{}}
}

// Reserve makes room for n objects in a table that holds none, as the
// initial list's address feed knows how many it brings: its maps are
// then made once, rather than grown and rehashed step by step. A table
// that holds anything is left as it is. Safe for concurrent use.
func (t *Table[O]) Reserve(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byIP) == 0 && len(t.byUID) == 0 {
		t.byIP, t.byUID = make(map[netip.Addr]*holders[O], n), make(map[ownerID]*record[O], n)
	}
}

// ownerID names an object in the table: its kind and UID, or its
// namespace/name when it has no UID.
type ownerID struct {
	kind Kind
	uid  string
}

// is reports whether r is the record of the object id names: idOf of
// its owner, without making the key of an object that has no UID. A
// record does not keep its id: there is one per object, and its owner
// says it.
func (r *record[O]) is(id ownerID) bool {
	o := &r.owner[0]
	if o.Kind != id.kind {
		return false
	}
	if o.UID != "" {
		return o.UID == id.uid
	}
	k, n := id.uid, len(o.Namespace)
	return len(k) == n+1+len(o.Name) && k[:n] == o.Namespace && k[n] == '/' && k[n+1:] == o.Name
}

func idOf(o *Owner) ownerID {
	if o.UID == "" {
		return ownerID{o.Kind, o.Namespace + "/" + o.Name}
	}
	return ownerID{o.Kind, o.UID}
}

// record is what one object holds, as the lookups answer it. obj and
// owner are arrays of one so that an address the record alone holds, in
// its owner's role, answers with them as its lists (newHolders): most
// addresses have one holder, and a list of their own would copy the
// summary for each.
type record[O any] struct {
	obj [1]O
	// owner is the object's summary, its Ports those a port tells apart
	// (an active hostNetwork pod's, a Service's), nil otherwise.
	owner [1]Owner
	// held is each (address, role) once. A pod holds its podIPs whatever
	// its phase (the podIP index's values): completed pods answer too.
	held []Held
}

// holders are the holders of one address, ordered as Answer says: pods,
// Services, then nodes in one list (lists cuts it), with their objects
// index for index. Immutable once in the table: answers share the
// slices.
type holders[O any] struct {
	ip string // normalized (indexers.NormalizeIP)
	// many are the lists when they are not the one record's own arrays
	// (newHolders); nil when they are, as for most addresses: a pointer
	// costs a third of the two slices.
	many *heldLists[O]
	// pods and services are how many of the holders are pods, then
	// Services; the rest are nodes.
	pods, services int32
	// encoded is AppendHolders of these lists, made by the first lookup
	// of the address (encoding): most addresses are never looked up, and
	// an encoding costs about as much memory as the rest of the entry.
	encoded atomic.Pointer[[]byte]
	// records are the distinct objects holding the address (a Service
	// may hold it in two roles), in the lists' order, to rebuild from.
	records []*record[O]
}

// heldLists are the holders of an address and their objects, index for
// index.
type heldLists[O any] struct {
	owners []Owner
	items  []O
}

// all are the holders and their objects, in Answer's order.
func (h *holders[O]) all() ([]Owner, []O) {
	if h.many != nil {
		return h.many.owners, h.many.items
	}
	r := h.records[0]
	return r.owner[:], r.obj[:]
}

// LookupInto answers q (its At ignored: that is the history's) in *out,
// which it overwrites whole: a batch reuses one answer rather than
// copying a new one per address. Safe for concurrent use.
func (t *Table[O]) LookupInto(q Query, out *Answer[O]) error {
	*out = Answer[O]{}
	addr, norm, ok := parseAddress(q.IP)
	if !ok {
		return notAnAddress(q.IP)
	}
	if h := t.holders(addr); h != nil {
		out.IP = h.ip
		out.setHolders(h)
	} else {
		out.IP = addressString(addr, norm)
	}
	return out.finish(q, t.podsOnly)
}

// holders returns the holders of ip, nil when nobody holds it. The result
// is shared: read-only.
func (t *Table[O]) holders(ip netip.Addr) *holders[O] {
	t.mu.RLock()
	h := t.byIP[ip]
	t.mu.RUnlock()
	return h
}

// Addresses lists the addresses the table holds, in no order.
func (t *Table[O]) Addresses() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.byIP))
	for _, h := range t.byIP {
		out = append(out, h.ip)
	}
	return out
}

// Set records that obj holds what h says, replacing what the object of
// h.Owner's kind and UID held before. Only the addresses it held or holds
// are rebuilt.
func (t *Table[O]) Set(h Holding, obj O) {
	rec := &record[O]{obj: [1]O{obj}, owner: [1]Owner{h.Owner}}
	own := &rec.owner[0]
	own.Ports = nil
	switch h.Owner.Kind {
	case Pod:
		own.Role = RolePodIP
		if own.Active() {
			rec.held = h.Held // the same podIPs, each once
		} else {
			rec.held = make([]Held, len(h.PodIPs))
			for i, ip := range h.PodIPs {
				rec.held[i] = Held{IP: ip, Role: RolePodIP}
			}
		}
		if own.Active() && own.HostNetwork {
			own.Ports = h.Ports
		}
	case Service:
		own.Ports = h.Ports
		rec.held = h.Held
	default:
		rec.held = h.Held
	}
	t.set(idOf(&h.Owner), rec)
}

// Remove records that the object owner names was deleted.
func (t *Table[O]) Remove(owner Owner) { t.set(idOf(&owner), nil) }

// set records that the object id now holds what rec says; rec nil: it
// was deleted.
func (t *Table[O]) set(id ownerID, rec *record[O]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.byUID[id]
	if prev == nil && rec == nil {
		return
	}
	var touched []string
	for _, r := range []*record[O]{prev, rec} {
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
func (h *holders[O]) with(ip string, id ownerID, rec *record[O]) *holders[O] {
	if h != nil && rec != nil {
		if i := slices.IndexFunc(h.records, func(r *record[O]) bool { return r.is(id) }); i >= 0 && sameAt(h.records[i], rec, ip) {
			return h.withObject(i, rec)
		}
	}
	var records []*record[O]
	if h != nil {
		records = make([]*record[O], 0, len(h.records)+1)
		for _, r := range h.records {
			if !r.is(id) {
				records = append(records, r)
			}
		}
	}
	if rec != nil && slices.ContainsFunc(rec.held, func(e Held) bool { return e.IP == ip }) {
		records = append(records, rec)
	}
	if len(records) == 0 {
		return nil
	}
	slices.SortFunc(records, compareRecords)
	return newHolders(ip, records)
}

// newHolders makes the holders of ip from the records holding it, in
// Answer's order. An address one record holds once, in its owner's role,
// answers with the record's own arrays as its lists.
func newHolders[O any](ip string, records []*record[O]) *holders[O] {
	out := &holders[O]{ip: ip, records: records}
	if len(records) == 1 {
		r := records[0]
		n, role := 0, Role("")
		for _, e := range r.held {
			if e.IP == ip {
				n, role = n+1, e.Role
			}
		}
		if n == 1 && role == r.owner[0].Role {
			out.count(r.owner[0].Kind)
			return out
		}
	}
	l := &heldLists[O]{}
	out.many = l
	for _, r := range records {
		for _, e := range r.held {
			if e.IP != ip {
				continue
			}
			o := r.owner[0]
			o.Role = e.Role
			l.owners, l.items = append(l.owners, o), append(l.items, r.obj[0])
			out.count(r.owner[0].Kind)
		}
	}
	return out
}

// count counts one more holder of kind (holders come in Answer's order).
func (h *holders[O]) count(kind Kind) {
	switch kind {
	case Pod:
		h.pods++
	case Service:
		h.services++
	}
}

// lists cuts the holders into Answer's lists, nil where there are none,
// each capped so that appending to one never writes into the next.
func (h *holders[O]) lists() (pods, services, nodes []Owner, podItems, serviceItems, nodeItems []O) {
	owners, items := h.all()
	p, s, n := int(h.pods), int(h.pods+h.services), len(owners)
	cut := func(lo, hi int) ([]Owner, []O) {
		if lo == hi {
			return nil, nil
		}
		return owners[lo:hi:hi], items[lo:hi:hi]
	}
	pods, podItems = cut(0, p)
	services, serviceItems = cut(p, s)
	nodes, nodeItems = cut(s, n)
	return
}

// encoding returns AppendHolders of h's lists, made once. Lookups racing
// to make it make the same bytes; one is kept.
func (h *holders[O]) encoding() []byte {
	if e := h.encoded.Load(); e != nil {
		return *e
	}
	pods, services, nodes, _, _, _ := h.lists()
	e := appendHolders(nil, pods, services, nodes)
	h.encoded.CompareAndSwap(nil, &e)
	return *h.encoded.Load()
}

// compareRecords orders records as the answers list holders: pods first,
// as comparePods orders them, then Services, then nodes, by namespace and
// name (a Service's roles then follow its held order).
func compareRecords[O any](a, b *record[O]) int {
	if c := int(a.owner[0].Kind) - int(b.owner[0].Kind); c != 0 {
		return c
	}
	if a.owner[0].Kind == Pod {
		return comparePods(&a.owner[0], &b.owner[0])
	}
	return compareNames(&a.owner[0], &b.owner[0])
}

func compareNames(a, b *Owner) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// comparePods orders pods as Answer says: active first, then not
// hostNetwork first, then by namespace/name.
func comparePods(a, b *Owner) int {
	if aa, ba := a.Active(), b.Active(); aa != ba {
		return boolOrder(aa)
	}
	if a.HostNetwork != b.HostNetwork {
		return boolOrder(!a.HostNetwork)
	}
	return compareNames(a, b)
}

// boolOrder sorts true first.
func boolOrder(first bool) int {
	if first {
		return -1
	}
	return 1
}

// sameAt reports whether a and b, two versions of one object, answer the
// same about ip: the same summary, names, ports and roles there. The most
// common update (a pod's status changing elsewhere) is such a one.
func sameAt[O any](a, b *record[O], ip string) bool {
	if !sameOwner(&a.owner[0], &b.owner[0]) || !slices.Equal(a.owner[0].Ports, b.owner[0].Ports) {
		return false
	}
	var ra, rb []Role
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

// sameOwner compares every member but the ports.
func sameOwner(a, b *Owner) bool {
	return a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name && a.UID == b.UID && a.Role == b.Role &&
		a.HostNetwork == b.HostNetwork && a.NodeName == b.NodeName && a.Phase == b.Phase
}

// withObject is h with records[i] replaced by rec, which answers the same
// (sameAt): the order, the summaries and the encoding stay; the lists are
// made again, since a list may be the old record's own array, which must
// not keep the old object.
func (h *holders[O]) withObject(i int, rec *record[O]) *holders[O] {
	records := slices.Clone(h.records)
	records[i] = rec
	out := newHolders(h.ip, records)
	out.encoded.Store(h.encoded.Load())
	return out
}
