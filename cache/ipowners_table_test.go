package cache

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/indexers"
)

// tableWorld drives the owner table through the feeds, as the informers'
// one handler does, beside a model of the informers' stores: for each
// kind, the objects by namespace/name.
type tableWorld struct {
	t      *testing.T
	rng    *rand.Rand
	table  *ownerTable
	feeds  map[string]*ipFeed
	stores map[string]map[string]*Object
	uids   int
	rv     int
}

var tableIPs = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "fd00::1", "fd00::2"}

func newTableWorld(t *testing.T, seed uint64) *tableWorld {
	w := &tableWorld{t: t, rng: rand.New(rand.NewPCG(seed, 15)), table: newOwnerTable(),
		feeds: map[string]*ipFeed{}, stores: map[string]map[string]*Object{}}
	mirror := newAddrMirror(time.Now, StreamOptions{})
	for _, kind := range []string{"pods", "services", "nodes"} {
		w.feeds[kind] = &ipFeed{kind: kind, mirror: mirror, owners: w.table}
		w.stores[kind] = map[string]*Object{}
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

func quoted(xs []string) string {
	var q []string
	for _, x := range xs {
		q = append(q, fmt.Sprintf("%q", x))
	}
	return strings.Join(q, ",")
}

// object makes a random version of kind ns/name with uid.
func (w *tableWorld) object(kind, ns, name, uid string) *Object {
	w.rv++
	meta := fmt.Sprintf(`"metadata":{"namespace":%q,"name":%q,"uid":%q,"resourceVersion":"%d"}`, ns, name, uid, w.rv)
	port := func(key string) string { return fmt.Sprintf(`{%q:%d}`, key, 9000+w.rng.IntN(3)) }
	var raw string
	switch kind {
	case "pods":
		ips := w.pick(tableIPs, 2)
		var podIPs []string
		for _, ip := range ips {
			podIPs = append(podIPs, fmt.Sprintf(`{"ip":%q}`, ip))
		}
		first := ""
		if len(ips) > 0 {
			first = ips[0]
		}
		phase := []string{"Running", "Pending", "Succeeded", "Failed"}[w.rng.IntN(4)]
		raw = fmt.Sprintf(`{%s,"spec":{"nodeName":"n%d","hostNetwork":%t,"containers":[{"name":"c","ports":[%s]}]},"status":{"phase":%q,"podIP":%q,"podIPs":[%s]}}`,
			meta, w.rng.IntN(2), w.rng.IntN(2) == 0, port("containerPort"), phase, first, strings.Join(podIPs, ","))
	case "services":
		cluster := append([]string{"None"}, tableIPs...)[w.rng.IntN(len(tableIPs)+1)]
		var lb []string
		for _, ip := range w.pick(tableIPs, 1) {
			lb = append(lb, fmt.Sprintf(`{"ip":%q}`, ip))
		}
		raw = fmt.Sprintf(`{%s,"spec":{"clusterIP":%q,"externalIPs":[%s],"ports":[%s]},"status":{"loadBalancer":{"ingress":[%s]}}}`,
			meta, cluster, quoted(w.pick(tableIPs, 2)), port("port"), strings.Join(lb, ","))
	case "nodes":
		var addrs []string
		for _, ip := range w.pick(tableIPs, 2) {
			addrs = append(addrs, fmt.Sprintf(`{"type":%q,"address":%q}`, []string{"InternalIP", "ExternalIP"}[w.rng.IntN(2)], ip))
		}
		addrs = append(addrs, `{"type":"Hostname","address":"host"}`)
		raw = fmt.Sprintf(`{%s,"status":{"addresses":[%s]}}`, meta, strings.Join(addrs, ","))
	}
	o, err := NewObject([]byte(raw), "v1", kindNames[kind])
	if err != nil {
		w.t.Fatalf("%s: %v", raw, err)
	}
	return o
}

// step applies one random event to a store and tells the feed, as the
// informer would: add, update (same UID, or a new one: an object deleted
// and recreated between two watch events, seen by a relist), delete (or
// its tombstone, after a relist).
func (w *tableWorld) step() string {
	kind := []string{"pods", "pods", "services", "nodes"}[w.rng.IntN(4)]
	ns := []string{"a", "b"}[w.rng.IntN(2)]
	if kind == "nodes" {
		ns = ""
	}
	name := fmt.Sprintf("%s%d", kind[:1], w.rng.IntN(4))
	key := ns + "/" + name
	store, feed := w.stores[kind], w.feeds[kind]
	old := store[key]
	newUID := func() string { w.uids++; return fmt.Sprintf("uid-%d", w.uids) }
	switch r := w.rng.IntN(10); {
	case old == nil:
		o := w.object(kind, ns, name, newUID())
		store[key] = o
		feed.add(o, w.rng.IntN(2) == 0)
		return "add " + key
	case r < 2:
		w.rv++
		raw := strings.Replace(string(old.raw), `"resourceVersion":"`+old.resourceVersion+`"`, fmt.Sprintf(`"resourceVersion":"%d"`, w.rv), 1)
		o, err := NewObject([]byte(raw), "v1", kindNames[kind])
		if err != nil || o.resourceVersion == old.resourceVersion {
			w.t.Fatalf("touching %s: %v", raw, err)
		}
		store[key] = o
		feed.update(old, o)
		return "touch " + key
	case r < 5:
		o := w.object(kind, ns, name, old.uid)
		store[key] = o
		feed.update(old, o)
		return "update " + key
	case r < 7:
		o := w.object(kind, ns, name, newUID())
		store[key] = o
		feed.update(old, o)
		return "recreate " + key
	case r < 8:
		delete(store, key)
		feed.remove(toolscache.DeletedFinalStateUnknown{Key: key, Obj: old})
		return "tombstone " + key
	default:
		delete(store, key)
		feed.remove(old)
		return "delete " + key
	}
}

func (w *tableWorld) objects(kind string) []*Object {
	var out []*Object
	for _, o := range w.stores[kind] {
		out = append(out, o)
	}
	return out
}

// check holds every address's holders in the table to a scan of the
// stores, and so do the answers to queries with a port or a visibility.
func (w *tableWorld) check(history []string) {
	w.t.Helper()
	pods, services, nodes := w.objects("pods"), w.objects("services"), w.objects("nodes")
	held := 0
	for _, ip := range tableIPs {
		want := scanHolders(ip, pods, services, nodes)
		got := tableHolders(w.table, ip)
		if d := DiffAnswers(got, want); d != "" {
			w.t.Fatalf("%s after %s: %s", ip, strings.Join(history, ", "), d)
		}
		if len(want.Pods)+len(want.Services)+len(want.Nodes) > 0 {
			held++
		}
		for range 3 {
			q := IPQuery{IP: ip}
			if w.rng.IntN(2) == 0 {
				q.Port = indexers.Port{Number: int32(9000 + w.rng.IntN(3)), Protocol: "TCP"}
			}
			if w.rng.IntN(2) == 0 {
				hidden := []string{"a", "b", ""}[w.rng.IntN(3)]
				q.Visible = func(_ Resource, ns string) bool { return ns != hidden }
			}
			g, wa := got, want
			gotErr, wantErr := g.finish(q), wa.finish(q)
			if d := DiffAnswers(g, wa); d != "" || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				w.t.Fatalf("%s, port %v, after %s: %s (errors %v, %v)", ip, q.Port, strings.Join(history, ", "), d, gotErr, wantErr)
			}
		}
		// Answering must not have changed what the table holds.
		if d := DiffAnswers(tableHolders(w.table, ip), want); d != "" {
			w.t.Fatalf("%s: an answer changed the table: %s", ip, d)
		}
	}
	if len(w.table.byIP) != held {
		w.t.Fatalf("the table holds %d addresses, the stores %d", len(w.table.byIP), held)
	}
	n := len(w.stores["pods"]) + len(w.stores["services"]) + len(w.stores["nodes"])
	if len(w.table.byUID) > n {
		w.t.Fatalf("the table knows %d objects, the stores hold %d", len(w.table.byUID), n)
	}
}

// TestOwnerTableProperty: given random sequences of adds, updates,
// recreations under the same name, deletes and tombstones of pods
// (hostNetwork or not, completed or not), Services and nodes sharing a
// few addresses, when the feeds see them, then after every event each
// address's holders in the table, and the answers made from them with a
// port or a visibility, are those a scan of the stores finds.
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

// TestOwnerTableLateDelete: given a pod holding an address and a pod of
// another namespace taking it over before the first one's delete arrives
// (two informers), when the late delete comes, then the new owner stays.
func TestOwnerTableLateDelete(t *testing.T) {
	w := newTableWorld(t, 1)
	mk := func(ns, name, uid string) *Object {
		o, err := NewObject(fmt.Appendf(nil, `{"metadata":{"namespace":%q,"name":%q,"uid":%q},"status":{"phase":"Running","podIP":"10.0.0.1"}}`, ns, name, uid), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	old, cur := mk("a", "web", "u1"), mk("b", "web", "u2")
	w.feeds["pods"].add(old, false)
	w.feeds["pods"].add(cur, false)
	w.feeds["pods"].remove(old)
	got := tableHolders(w.table, "10.0.0.1")
	if len(got.Items) != 1 || got.Items[0] != cur {
		t.Fatalf("after the late delete: %v; want b/web only", keys(got.Items))
	}
	w.feeds["pods"].remove(mk("b", "web", "u9")) // a delete of another object of that name: not this one
	if got := tableHolders(w.table, "10.0.0.1"); len(got.Items) != 1 {
		t.Fatalf("a delete of another UID removed the owner: %v", keys(got.Items))
	}
}

// TestOwnerTableEncodesOnFirstLookup: given a pod added to the table, when
// nobody has looked its address up, then the table holds no encoding of
// it (most addresses are never looked up: an encoding would cost as much
// as the rest of the entry); when it is looked up, then the encoding is
// made, kept, and kept too by an update that answers the same.
func TestOwnerTableEncodesOnFirstLookup(t *testing.T) {
	w := newTableWorld(t, 1)
	pod := func(rv string) *Object {
		o, err := NewObject(fmt.Appendf(nil, `{"metadata":{"namespace":"a","name":"web","uid":"u1","resourceVersion":%q},"status":{"phase":"Running","podIP":"10.0.0.1"}}`, rv), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	w.feeds["pods"].add(pod("1"), false)
	h := w.table.holders(netip.MustParseAddr("10.0.0.1"))
	if h == nil || h.encoded.Load() != nil {
		t.Fatalf("before any lookup: holders %v; want them, without an encoding", h)
	}
	l := tableHolders(w.table, "10.0.0.1")
	enc := h.encoded.Load()
	if enc == nil || string(*enc) != string(appendHolders(nil, l.Pods, l.Services, l.Nodes)) {
		t.Fatalf("after a lookup: encoding %v; want the holders' encoding", enc)
	}
	w.feeds["pods"].update(pod("1"), pod("2")) // the same answer: only the object changes
	if h2 := w.table.holders(netip.MustParseAddr("10.0.0.1")); h2 == h || h2.encoded.Load() != enc {
		t.Fatal("an update answering the same did not keep the encoding")
	}
}
