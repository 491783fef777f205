package ipowner

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// object stands for what the cache stores: the table hands it back
// without looking inside. Each version of an object is a new one.
type object struct {
	key string
	rv  int
}

// tableWorld drives the owner table as the cache's feed does, beside a
// model of the informers' stores: for each kind, the current version of
// each object by namespace/name, with what it holds.
type tableWorld struct {
	t      *testing.T
	rng    *rand.Rand
	table  *Table[*object]
	stores map[Kind]map[string]stored
	uids   int
	rv     int
}

type stored struct {
	h   Holding
	obj *object
}

var tableIPs = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "fd00::1", "fd00::2"}

func newTableWorld(t *testing.T, seed uint64) *tableWorld {
	w := &tableWorld{t: t, rng: rand.New(rand.NewPCG(seed, 15)), table: NewTable[*object](Kinds[:]...),
		stores: map[Kind]map[string]stored{}}
	for _, kind := range Kinds {
		w.stores[kind] = map[string]stored{}
	}
	return w
}

func (w *tableWorld) pick(from []string, most int) []string {
	var out []string
	for range w.rng.IntN(most + 1) {
		out = append(out, from[w.rng.IntN(len(from))])
	}
	return out
}

// holding makes a random version of kind ns/name with uid, as the
// cache's feed reads one: a pod's podIPs (held while active), a Service's
// cluster, external and load-balancer addresses, a node's addresses, each
// (address, role) once, and the ports of those a port tells apart.
func (w *tableWorld) holding(kind Kind, ns, name, uid string) Holding {
	h := Holding{Owner: Owner{Kind: kind, Namespace: ns, Name: name, UID: uid}}
	add := func(ip string, role Role) {
		if e := (Held{ip, role}); !slices.Contains(h.Held, e) {
			h.Held = append(h.Held, e)
		}
	}
	port := []Port{{Number: int32(9000 + w.rng.IntN(3)), Protocol: "TCP"}}
	switch kind {
	case Pod:
		h.Owner.Phase = []string{"Running", "Pending", "Succeeded", "Failed"}[w.rng.IntN(4)]
		h.Owner.NodeName = fmt.Sprint("n", w.rng.IntN(2))
		h.Owner.HostNetwork = w.rng.IntN(2) == 0
		for _, ip := range w.pick(tableIPs, 2) {
			if !slices.Contains(h.PodIPs, ip) {
				h.PodIPs = append(h.PodIPs, ip)
			}
		}
		if h.Owner.Active() {
			for _, ip := range h.PodIPs {
				add(ip, RolePodIP)
			}
		}
		if h.Owner.HostNetwork && len(h.Held) > 0 {
			h.Ports = port
		}
	case Service:
		for _, ip := range w.pick(tableIPs, 1) {
			add(ip, RoleClusterIP)
		}
		for _, ip := range w.pick(tableIPs, 2) {
			add(ip, RoleExternalIP)
		}
		for _, ip := range w.pick(tableIPs, 1) {
			add(ip, RoleLoadBalancer)
		}
		if len(h.Held) > 0 {
			h.Ports = port
		}
	case Node:
		for _, ip := range w.pick(tableIPs, 2) {
			add(ip, []Role{RoleNodeInternal, RoleNodeExternal}[w.rng.IntN(2)])
		}
	}
	return h
}

// step applies one random event to a store and tells the table, as the
// feed would: add, update (same UID, or a new one: an object deleted and
// recreated between two watch events, seen by a relist, which the feed
// tells as the delete of the old one first), delete.
func (w *tableWorld) step() string {
	kind := []Kind{Pod, Pod, Service, Node}[w.rng.IntN(4)]
	ns := []string{"a", "b"}[w.rng.IntN(2)]
	if kind == Node {
		ns = ""
	}
	name := fmt.Sprintf("%s%d", kind.Plural()[:1], w.rng.IntN(4))
	key := ns + "/" + name
	store := w.stores[kind]
	old, exists := store[key]
	newUID := func() string { w.uids++; return fmt.Sprintf("uid-%d", w.uids) }
	put := func(h Holding) {
		w.rv++
		s := stored{h: h, obj: &object{key: key, rv: w.rv}}
		store[key] = s
		w.table.Set(s.h, s.obj)
	}
	switch r := w.rng.IntN(10); {
	case !exists:
		put(w.holding(kind, ns, name, newUID()))
		return "add " + key
	case r < 2:
		put(old.h) // a change elsewhere in the object: the same holding
		return "touch " + key
	case r < 5:
		put(w.holding(kind, ns, name, old.h.Owner.UID))
		return "update " + key
	case r < 7:
		w.table.Remove(old.h.Owner)
		put(w.holding(kind, ns, name, newUID()))
		return "recreate " + key
	default:
		delete(store, key)
		w.table.Remove(old.h.Owner)
		return "delete " + key
	}
}

// scan is the oracle: the holders of ip found by going through every
// stored object, ordered as Answer says, written plainly.
func (w *tableWorld) scan(ip string) Answer[*object] {
	var l Answer[*object]
	sorted := func(kind Kind) []stored {
		var out []stored
		for _, s := range w.stores[kind] {
			out = append(out, s)
		}
		slices.SortFunc(out, func(a, b stored) int {
			return strings.Compare(a.h.Owner.Namespace+"/"+a.h.Owner.Name, b.h.Owner.Namespace+"/"+b.h.Owner.Name)
		})
		return out
	}
	var active, host, done, doneHost []stored
	for _, s := range sorted(Pod) {
		switch {
		case !slices.Contains(s.h.PodIPs, ip):
		case !s.h.Owner.Active() && s.h.Owner.HostNetwork:
			doneHost = append(doneHost, s)
		case !s.h.Owner.Active():
			done = append(done, s)
		case s.h.Owner.HostNetwork:
			host = append(host, s)
		default:
			active = append(active, s)
		}
	}
	for _, s := range slices.Concat(active, host, done, doneHost) {
		o := s.h.Owner
		o.Role, o.Ports = RolePodIP, nil
		if o.Active() && o.HostNetwork {
			o.Ports = s.h.Ports
		}
		l.Pods, l.Items = append(l.Pods, o), append(l.Items, s.obj)
	}
	for _, s := range sorted(Service) {
		for _, e := range s.h.Held {
			if e.IP == ip {
				o := s.h.Owner
				o.Role, o.Ports = e.Role, s.h.Ports
				l.Services, l.ServiceItems = append(l.Services, o), append(l.ServiceItems, s.obj)
			}
		}
	}
	for _, s := range sorted(Node) {
		for _, e := range s.h.Held {
			if e.IP == ip {
				o := s.h.Owner
				o.Role = e.Role
				l.Nodes, l.NodeItems = append(l.Nodes, o), append(l.NodeItems, s.obj)
			}
		}
	}
	l.IP = ip
	return l
}

// tableHolders is what the table holds for ip, as an Answer.
func tableHolders(t *Table[*object], ip string) Answer[*object] {
	l := Answer[*object]{IP: ip}
	if h := t.holders(netip.MustParseAddr(ip)); h != nil {
		l.setHolders(h)
	}
	return l
}

// diffAnswers describes how two answers differ, "" when they do not: every
// member, the holders' objects by identity, and the encoding.
func diffAnswers(got, want Answer[*object]) string {
	g, w := got, want
	g.encoded, w.encoded = nil, nil
	if !reflect.DeepEqual(g, w) { // objects are pointers: the same ones, not equal ones
		return fmt.Sprintf("\n got %+v\nwant %+v", g, w)
	}
	if enc, wantEnc := got.AppendHolders(nil), want.AppendHolders(nil); string(enc) != string(wantEnc) {
		return fmt.Sprintf("encoded %s, want %s", enc, wantEnc)
	}
	return ""
}

// check holds every address's holders in the table to a scan of the
// stores, and so do the answers to queries with a port or a visibility.
func (w *tableWorld) check(history []string) {
	w.t.Helper()
	held := 0
	for _, ip := range tableIPs {
		want := w.scan(ip)
		got := tableHolders(w.table, ip)
		if d := diffAnswers(got, want); d != "" {
			w.t.Fatalf("%s after %s: %s", ip, strings.Join(history, ", "), d)
		}
		if len(want.Pods)+len(want.Services)+len(want.Nodes) > 0 {
			held++
		}
		for range 3 {
			q := Query{IP: ip}
			if w.rng.IntN(2) == 0 {
				q.Port = Port{Number: int32(9000 + w.rng.IntN(3)), Protocol: "TCP"}
			}
			if w.rng.IntN(2) == 0 {
				hidden := []string{"a", "b", ""}[w.rng.IntN(3)]
				q.Visible = func(_ Kind, ns string) bool { return ns != hidden }
			}
			var g Answer[*object]
			gotErr := w.table.LookupInto(q, &g)
			wa := want
			wantErr := wa.finish(q, false)
			if d := diffAnswers(g, wa); d != "" || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				w.t.Fatalf("%s, port %v, after %s: %s (errors %v, %v)", ip, q.Port, strings.Join(history, ", "), d, gotErr, wantErr)
			}
		}
		// Answering must not have changed what the table holds.
		if d := diffAnswers(tableHolders(w.table, ip), want); d != "" {
			w.t.Fatalf("%s: an answer changed the table: %s", ip, d)
		}
	}
	if len(w.table.byIP) != held {
		w.t.Fatalf("the table holds %d addresses, the stores %d", len(w.table.byIP), held)
	}
	n := len(w.stores[Pod]) + len(w.stores[Service]) + len(w.stores[Node])
	if len(w.table.byUID) > n {
		w.t.Fatalf("the table knows %d objects, the stores hold %d", len(w.table.byUID), n)
	}
}

// TestOwnerTableProperty: given random sequences of adds, updates,
// recreations under the same name and deletes of pods (hostNetwork or
// not, completed or not), Services and nodes sharing a few addresses,
// when the table is told them, then after every event each address's
// holders in the table, and the answers made from them with a port or a
// visibility, are those a scan of the stores finds.
func TestOwnerTableProperty(t *testing.T) {
	for seed := range uint64(12) {
		w := newTableWorld(t, seed)
		var history []string
		for range 150 {
			history = append(history, w.step())
			if len(history) > 8 {
				history = history[1:]
			}
			w.check(history)
		}
	}
}

func runningPod(ns, name, uid string) Holding {
	return Holding{Owner: Owner{Kind: Pod, Namespace: ns, Name: name, UID: uid, Phase: "Running"},
		Held: []Held{{"10.0.0.1", RolePodIP}}, PodIPs: []string{"10.0.0.1"}}
}

// TestOwnerTableLateDelete: given a pod holding an address and a pod of
// another namespace taking it over before the first one's delete arrives
// (two informers), when the late delete comes, then the new owner stays.
func TestOwnerTableLateDelete(t *testing.T) {
	table := NewTable[*object](Pod)
	old, cur := runningPod("a", "web", "u1"), runningPod("b", "web", "u2")
	curObj := &object{key: "b/web"}
	table.Set(old, &object{key: "a/web"})
	table.Set(cur, curObj)
	table.Remove(old.Owner)
	got := tableHolders(table, "10.0.0.1")
	if len(got.Items) != 1 || got.Items[0] != curObj {
		t.Fatalf("after the late delete: %+v; want b/web only", got.Pods)
	}
	table.Remove(runningPod("b", "web", "u9").Owner) // a delete of another object of that name: not this one
	if got := tableHolders(table, "10.0.0.1"); len(got.Items) != 1 {
		t.Fatalf("a delete of another UID removed the owner: %+v", got.Pods)
	}
}

// TestOwnerTableEncodesOnFirstLookup: given a pod added to the table, when
// nobody has looked its address up, then the table holds no encoding of
// it (most addresses are never looked up: an encoding would cost as much
// as the rest of the entry); when it is looked up, then the encoding is
// made, kept, and kept too by an update that answers the same.
func TestOwnerTableEncodesOnFirstLookup(t *testing.T) {
	table := NewTable[*object](Pod)
	pod := runningPod("a", "web", "u1")
	table.Set(pod, &object{key: "a/web", rv: 1})
	h := table.holders(netip.MustParseAddr("10.0.0.1"))
	if h == nil || h.encoded.Load() != nil {
		t.Fatalf("before any lookup: holders %v; want them, without an encoding", h)
	}
	var l Answer[*object]
	if err := table.LookupInto(Query{IP: "10.0.0.1"}, &l); err != nil {
		t.Fatal(err)
	}
	enc := h.encoded.Load()
	if enc == nil || string(*enc) != string(appendHolders(nil, l.Pods, l.Services, l.Nodes)) {
		t.Fatalf("after a lookup: encoding %v; want the holders' encoding", enc)
	}
	table.Set(pod, &object{key: "a/web", rv: 2}) // the same answer: only the object changes
	if h2 := table.holders(netip.MustParseAddr("10.0.0.1")); h2 == h || h2.encoded.Load() != enc {
		t.Fatal("an update answering the same did not keep the encoding")
	}
}

// TestOwnerTableObjectsWithoutUID: objects without a UID are known by
// kind and namespace/name: an update replaces its own holdings only, a
// pod of that name in another namespace and a node of that name are
// other objects, and a remove by name removes that one object.
func TestOwnerTableObjectsWithoutUID(t *testing.T) {
	table := NewTable[*object](Pod, Node)
	a, b := runningPod("a", "web", ""), runningPod("b", "web", "")
	node := Holding{Owner: Owner{Kind: Node, Name: "web"}, Held: []Held{{"10.0.0.1", RoleNodeInternal}}}
	table.Set(a, &object{key: "a/web"})
	table.Set(b, &object{key: "b/web"})
	table.Set(node, &object{key: "web"})
	bNew := &object{key: "b/web", rv: 2}
	table.Set(b, bNew) // an update of b: a stays
	if got := tableHolders(table, "10.0.0.1"); len(got.Pods) != 2 || len(got.Nodes) != 1 || got.Items[1] != bNew {
		t.Fatalf("after b's update: pods %+v, nodes %+v; want a and b (updated), and the node", got.Pods, got.Nodes)
	}
	table.Remove(a.Owner)
	if got := tableHolders(table, "10.0.0.1"); len(got.Pods) != 1 || got.Pods[0].Namespace != "b" || len(got.Nodes) != 1 {
		t.Fatalf("after a's delete: pods %+v, nodes %+v; want b and the node", got.Pods, got.Nodes)
	}
	table.Remove(node.Owner)
	table.Remove(b.Owner)
	if len(table.byUID) != 0 || len(table.byIP) != 0 {
		t.Fatalf("after every delete the table knows %d objects and %d addresses", len(table.byUID), len(table.byIP))
	}
}
