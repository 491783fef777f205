package cache_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"
)

// addrReader drains an address subscription into what an agent keeps.
type addrReader struct {
	t      *testing.T
	sub    cache.Subscription
	notify chan struct{}
	owners map[string]string // ip → owners as ownersKey writes them
	pos    string            // the last position
	log    []string          // "TYPE ip owners" of every message after SYNCED, and RESET
	synced bool
	ended  string
}

func watchAddresses(t *testing.T, c *cache.Cache, q cache.AddressWatchQuery) *addrReader {
	t.Helper()
	r := &addrReader{t: t, notify: make(chan struct{}, 1), owners: map[string]string{}}
	sub, err := c.WatchAddresses(q, r.notify)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	r.sub = sub
	return r
}

// ownersKey is "Kind ns/name role" of each owner, joined by "|".
func ownersKey(owners gjson.Result) string {
	var out []string
	for _, o := range owners.Array() {
		out = append(out, fmt.Sprintf("%s %s/%s %s", o.Get("kind").Str, o.Get("namespace").Str, o.Get("name").Str, o.Get("role").Str))
	}
	return strings.Join(out, "|")
}

// drain applies every message there is now.
func (r *addrReader) drain() {
	for {
		m, ok := r.sub.Next()
		if !ok {
			return
		}
		var buf bytes.Buffer
		m.WriteTo(&buf)
		msg := gjson.ParseBytes(buf.Bytes())
		if !json.Valid(buf.Bytes()) || msg.Get("type").Str != string(m.Type) {
			r.t.Fatalf("message %q does not say its type %s", buf.Bytes(), m.Type)
		}
		switch m.Type {
		case cache.Owners:
			ip, owners := msg.Get("ip").Str, ownersKey(msg.Get("owners"))
			if owners == "" {
				delete(r.owners, ip)
			} else {
				r.owners[ip] = owners
			}
			// Changes, replayed or live, carry their position; snapshot
			// items, which come only before SYNCED, carry none.
			if m.ResourceVersion != "" {
				r.log = append(r.log, "OWNERS "+ip+" "+owners)
			} else if r.synced {
				r.t.Fatalf("a change without a position: %s", buf.Bytes())
			}
		case cache.Reset:
			r.owners = map[string]string{}
			r.log = append(r.log, "RESET")
		case cache.Synced:
			r.synced = true
		case cache.ResyncRequired:
			r.ended = m.Reason
			return
		}
		if m.ResourceVersion != "" {
			r.pos = m.ResourceVersion
		}
	}
}

// until drains until cond holds, failing after a deadline.
func (r *addrReader) until(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.After(15 * time.Second)
	for r.drain(); !cond(); r.drain() {
		select {
		case <-r.notify:
		case <-deadline:
			r.t.Fatalf("timed out waiting until %s; log %q", what, r.log)
		}
	}
}

func reusePod(name, ip, node string) []byte {
	return fmt.Appendf(nil, `{"metadata":{"namespace":"reuse","name":%q},"spec":{"nodeName":%q,"containers":[{"name":"c","image":"x"}]},`+
		`"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}]}}`, name, node, ip, ip)
}

// TestAddressStreamSnapshotIsTheLookups: given the demo cluster, when the
// address stream is opened, then its snapshot holds Services' ClusterIPs,
// node addresses and pod addresses, each with the owners a lookup of the
// address answers (active pods, Services, nodes).
func TestAddressStreamSnapshotIsTheLookups(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	r := watchAddresses(t, f.Cache, cache.AddressWatchQuery{})
	r.until("SYNCED", func() bool { return r.synced })
	for ip, want := range map[string]string{"10.96.0.1": "Service default/kubernetes clusterIP"} {
		if r.owners[ip] != want {
			t.Errorf("%s: %q; expect %q", ip, r.owners[ip], want)
		}
	}
	if !strings.Contains(r.owners["10.0.0.11"], "Node /node-1 nodeInternal") {
		t.Errorf("10.0.0.11: %q; expect node-1 among its owners", r.owners["10.0.0.11"])
	}
	kinds := map[string]int{}
	for ip, got := range r.owners {
		l, err := f.Cache.LookupAddress(ipowner.Query{IP: ip})
		if err != nil {
			t.Fatalf("%s is in the snapshot but its lookup fails: %v", ip, err)
		}
		var want []string
		for _, p := range l.Pods {
			if p.Active() {
				want = append(want, fmt.Sprintf("Pod %s/%s podIP", p.Namespace, p.Name))
			}
		}
		for _, s := range l.Services {
			want = append(want, fmt.Sprintf("Service %s/%s %s", s.Namespace, s.Name, s.Role))
		}
		for _, n := range l.Nodes {
			want = append(want, fmt.Sprintf("Node /%s %s", n.Name, n.Role))
		}
		if strings.Join(want, "|") != got {
			t.Errorf("%s: the stream says %q, a lookup %q", ip, got, strings.Join(want, "|"))
		}
		for _, o := range strings.Split(got, "|") {
			kinds[strings.Fields(o)[0]]++
		}
	}
	if kinds["Pod"] == 0 || kinds["Service"] == 0 || kinds["Node"] == 0 {
		t.Errorf("owners by kind in the snapshot: %v; expect pods, Services and nodes", kinds)
	}
}

// TestAddressStreamReuseAndResume: given an address reused (A, then free,
// then B), when the stream follows it, then it sees [A], [], [B]; a stream
// resumed from the position after [A] sees exactly the rest, a filtered
// one only what concerns it, and positions it cannot serve reset it.
func TestAddressStreamReuseAndResume(t *testing.T) {
	f := cachetest.StartWith(t, cachetest.Config{Options: cache.Options{Streams: cache.StreamOptions{HistorySize: 8}}},
		cachetest.DefaultSpecs()...)
	const x = "10.250.0.9"
	r := watchAddresses(t, f.Cache, cache.AddressWatchQuery{})
	r.until("SYNCED", func() bool { return r.synced })
	onNode2 := watchAddresses(t, f.Cache, cache.AddressWatchQuery{Node: "node-2", Kinds: []string{"pods"}})
	onNode2.until("SYNCED", func() bool { return onNode2.synced })

	apply := func(obj []byte) {
		if err := f.Sim.Apply("pods", obj); err != nil {
			t.Fatal(err)
		}
	}
	apply(reusePod("a", x, "node-1"))
	r.until("A holds X", func() bool { return r.owners[x] != "" })
	afterA := r.pos
	if err := f.Sim.Delete("pods", "reuse", "a"); err != nil {
		t.Fatal(err)
	}
	r.until("X is free", func() bool { _, held := r.owners[x]; return !held })
	apply(reusePod("b", x, "node-2"))
	r.until("B holds X", func() bool { return r.owners[x] != "" })

	var got []string
	for _, l := range r.log {
		if strings.Contains(l, " "+x+" ") {
			got = append(got, l)
		}
	}
	want := []string{"OWNERS " + x + " Pod reuse/a podIP", "OWNERS " + x + " ", "OWNERS " + x + " Pod reuse/b podIP"}
	if !slices.Equal(got, want) {
		t.Errorf("X's changes: %q; expect %q", got, want)
	}
	onNode2.until("B on node-2 is seen", func() bool { return onNode2.owners[x] != "" })
	for _, l := range onNode2.log {
		if strings.Contains(l, "reuse/a") || !strings.Contains(l, "Pod ") {
			t.Errorf("the stream of node-2's pods saw %q", l)
		}
	}

	resumed := watchAddresses(t, f.Cache, cache.AddressWatchQuery{ResourceVersion: afterA})
	resumed.until("resumed B holds X", func() bool { return resumed.owners[x] != "" })
	if !slices.Equal(resumed.log, r.log[slices.Index(r.log, want[0])+1:]) {
		t.Errorf("resumed after A: %q; expect what followed: %q", resumed.log, r.log)
	}

	for i := range 10 { // more changes than the history keeps
		apply(reusePod(fmt.Sprintf("filler-%d", i), fmt.Sprintf("10.250.1.%d", i), "node-1"))
	}
	r.until("the fillers are seen", func() bool { return r.owners["10.250.1.9"] != "" })
	old := watchAddresses(t, f.Cache, cache.AddressWatchQuery{ResourceVersion: afterA})
	old.until("reset and synced", func() bool { return old.synced })
	if len(old.log) == 0 || old.log[0] != "RESET" || old.owners[x] != r.owners[x] || len(old.owners) != len(r.owners) {
		t.Errorf("resume from a forgotten position: log %q, %d addresses; expect RESET then the %d of a snapshot",
			old.log, len(old.owners), len(r.owners))
	}
	epoch, _, _ := strings.Cut(afterA, "-")
	other := watchAddresses(t, f.Cache, cache.AddressWatchQuery{ResourceVersion: strings.Repeat("0", len(epoch)) + "-1"})
	other.until("reset and synced", func() bool { return other.synced })
	if len(other.log) == 0 || other.log[0] != "RESET" {
		t.Errorf("resume from another server's position: %q; expect RESET", other.log)
	}
}

// TestAddressStreamRefusesBadQueries: bad kinds, nodes and positions are
// ErrInvalid (the cache's for what it checks against its configuration,
// ipowner's for a position of the mirror), never a silent stream.
func TestAddressStreamRefusesBadQueries(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	for _, q := range []cache.AddressWatchQuery{
		{Kinds: []string{"deployments"}},
		{Kinds: []string{"services"}}, // not cached
		{Node: "Not_A_Node"},
		{ResourceVersion: "12"},
		{ResourceVersion: "zz-1"},
	} {
		if _, err := f.Cache.WatchAddresses(q, make(chan struct{}, 1)); !errors.Is(err, cache.ErrInvalid) && !errors.Is(err, ipowner.ErrInvalid) {
			t.Errorf("%+v: %v; expect ErrInvalid", q, err)
		}
	}
}

// TestAddressOwnerEncoding: the hand-written owners are encoding/json's.
func TestAddressOwnerEncoding(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	r := watchAddresses(t, f.Cache, cache.AddressWatchQuery{})
	for {
		m, ok := r.sub.Next()
		if !ok || m.Type != cache.Owners {
			break
		}
		var buf bytes.Buffer
		m.WriteTo(&buf)
		var decoded struct { // the wire format
			Type   string `json:"type"`
			IP     string `json:"ip"`
			Owners []struct {
				Kind        string `json:"kind"`
				Namespace   string `json:"namespace,omitempty"`
				Name        string `json:"name"`
				UID         string `json:"uid"`
				Role        string `json:"role"`
				HostNetwork bool   `json:"hostNetwork,omitempty"`
				NodeName    string `json:"nodeName,omitempty"`
			} `json:"owners"`
		}
		if err := json.Unmarshal(buf.Bytes(), &decoded); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(decoded)
		if !bytes.Equal(again, buf.Bytes()) {
			t.Fatalf("hand-written %s\nencoding/json %s", buf.Bytes(), again)
		}
	}
}

// TestAddressStreamSlowConsumerIsEnded: given a subscriber that does not
// read, when more changes come than its queue holds, then it is ended
// with RESYNC_REQUIRED (counted in the stream's statistics) and nobody
// waits for it.
func TestAddressStreamSlowConsumerIsEnded(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	slow := watchAddresses(t, f.Cache, cache.AddressWatchQuery{QueueSize: 2})
	fast := watchAddresses(t, f.Cache, cache.AddressWatchQuery{})
	for i := range 4 {
		if err := f.Sim.Apply("pods", reusePod(fmt.Sprintf("s%d", i), fmt.Sprintf("10.250.2.%d", i), "node-1")); err != nil {
			t.Fatal(err)
		}
	}
	fast.until("the four pods", func() bool { return fast.owners["10.250.2.3"] != "" })
	stats := func() cache.StreamStats {
		all := f.Cache.StreamStats()
		return all[len(all)-1]
	}
	cachetest.Eventually(t, "the slow subscriber is dropped", func() bool { return stats().Dropped == 1 })
	if st := stats(); st.Resource != cache.AddressStream || st.Subscribers != 1 {
		t.Errorf("stream statistics %+v; expect %s with the one subscriber left", st, cache.AddressStream)
	}
	slow.drain()
	if !strings.Contains(slow.ended, "overflowed") {
		t.Errorf("the slow subscriber's end: %q; expect RESYNC_REQUIRED for its overflow", slow.ended)
	}
	if m, ok := slow.sub.Next(); ok {
		t.Errorf("a message after RESYNC_REQUIRED: %+v", m)
	}
}
