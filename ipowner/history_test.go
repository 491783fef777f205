package ipowner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// handClock is a clock tests move by hand.
type handClock struct{ t time.Time }

func (c *handClock) now() time.Time { return c.t }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func podHolding(uid string, host bool, ips ...string) Holding {
	h := Holding{Owner: Owner{Kind: Pod, Namespace: "ns", Name: "n-" + uid, UID: uid, HostNetwork: host}}
	for _, ip := range ips {
		h.Held = append(h.Held, Held{IP: ip, Role: RolePodIP})
	}
	return h
}

func svcHolding(uid string, role Role, ips ...string) Holding {
	h := Holding{Owner: Owner{Kind: Service, Namespace: "ns", Name: "s-" + uid, UID: uid}}
	for _, ip := range ips {
		h.Held = append(h.Held, Held{IP: ip, Role: role})
	}
	return h
}

// gone is the delete of uid (a holding of nothing).
func gone(h Holding) Holding { h.Held = nil; return h }

// ownersOf words an answer as "uid uid …" or the error's kind.
func ownersOf(ans HistoryAnswer, err error) string {
	switch {
	case errors.Is(err, ErrBeforeHistory):
		return "beforeHistory"
	case errors.Is(err, ErrNotFound):
		return "nobody"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case err != nil:
		return err.Error()
	}
	var uids []string
	for _, o := range ans.Owners {
		uids = append(uids, o.UID)
	}
	return ans.Certainty + ": " + strings.Join(uids, " ")
}

// TestHistoryRules: given events at known moments, when asked about a
// moment, then the owners and certainty follow the rules of the README.
func TestHistoryRules(t *testing.T) {
	const x, y = "10.1.0.5", "10.96.0.9"
	type step struct {
		at float64 // seconds after t0
		h  Holding
	}
	type ask struct {
		ip   string
		at   float64
		want string
	}
	tests := []struct {
		name  string
		steps []step
		asks  []ask
	}{
		{"reuse: A, released, B",
			[]step{{10, podHolding("A", false, x)}, {20, gone(podHolding("A", false, x))}, {30, podHolding("B", false, x)}},
			[]ask{{x, 5, "nobody"}, {x, 15, "exact: A"}, {x, 25, "nobody"}, {x, 35, "exact: B"}, {x, 10, "boundary: A"},
				{x, 21.5, "boundary: A"}, {x, 29, "boundary: B"}, {x, -1, "beforeHistory"}, {x, 100, "invalid"}}},
		{"a late delete of A never ends B",
			[]step{{10, podHolding("A", false, x)}, {30, podHolding("B", false, x)}, {40, gone(podHolding("A", false, x))}},
			[]ask{{x, 20, "exact: A"}, {x, 35, "exact: B"}, {x, 45, "exact: B"}, {x, 40, "exact: B"}, {x, 31, "boundary: A B"}}},
		{"A still claiming after B took the address is not reopened",
			[]step{{10, podHolding("A", false, x)}, {30, podHolding("B", false, x)}, {35, podHolding("A", false, x)}, {40, gone(podHolding("B", false, x))}},
			[]ask{{x, 37, "exact: B"}, {x, 45, "nobody"}}},
		{"recreated under the same name: a new interval",
			[]step{{10, podHolding("A1", false, x)}, {30, gone(podHolding("A1", false, x))}, {30.5, podHolding("A2", false, x)}},
			[]ask{{x, 20, "exact: A1"}, {x, 30.2, "boundary: A1 A2"}, {x, 40, "exact: A2"}}},
		{"hostNetwork pods share; a pod IP does not end them",
			[]step{{10, podHolding("H1", true, x)}, {11, podHolding("H2", true, x)}, {20, podHolding("P", false, x)}},
			[]ask{{x, 15, "exact: H1 H2"}, {x, 30, "exact: H1 H2 P"}}},
		{"a ClusterIP replaces a ClusterIP; an external IP is shared",
			[]step{{10, svcHolding("S1", RoleClusterIP, y)}, {20, svcHolding("S2", RoleClusterIP, y)},
				{30, svcHolding("E", RoleExternalIP, y)}},
			[]ask{{y, 15, "exact: S1"}, {y, 25, "exact: S2"}, {y, 35, "exact: S2 E"}}},
		{"an address dropped by an update ends, the others stay",
			[]step{{10, podHolding("D", false, x, "fd00::5")}, {20, podHolding("D", false, "fd00::5")}},
			[]ask{{x, 15, "exact: D"}, {x, 25, "nobody"}, {"fd00::5", 25, "exact: D"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &handClock{t0}
			x := newHistory(HistoryOptions{}, clk.now)
			for _, s := range tt.steps {
				clk.t = sec(s.at)
				x.Observe(s.h)
			}
			clk.t = sec(50)
			for _, a := range tt.asks {
				ans, _, err := x.at(a.ip, sec(a.at), nil)
				if got := ownersOf(ans, err); got != a.want {
					t.Errorf("%s at %gs: %s; expect %s", a.ip, a.at, got, a.want)
				}
			}
		})
	}
}

// TestHistoryStartUp: owners present when the history begins start at
// their creation or start time, marked, and moments before the history
// began are refused, never guessed.
func TestHistoryStartUp(t *testing.T) {
	clk := &handClock{sec(100)}
	x := newHistory(HistoryOptions{}, clk.now)
	h := podHolding("A", false, "10.1.0.1")
	h.Begin, h.Since = sec(50).UnixNano(), "start"
	x.Observe(h)
	clk.t = sec(120)
	ans, _, err := x.at("10.1.0.1", sec(110), nil)
	if ownersOf(ans, err) != "exact: A" || !ans.Owners[0].From.Equal(sec(50)) || ans.Owners[0].Since != "start" || !ans.Since.Equal(sec(100)) {
		t.Errorf("%s %+v since %s", ownersOf(ans, err), ans.Owners, ans.Since)
	}
	if _, _, err := x.at("10.1.0.1", sec(60), nil); !errors.Is(err, ErrBeforeHistory) {
		t.Errorf("before the history began: %v; expect beforeHistory", err)
	}
}

// TestHistoryFarFutureIsInTheFuture: a moment past the year 2262, where
// nanoseconds since 1970 overflow an int64, is in the future, not before
// the history.
func TestHistoryFarFutureIsInTheFuture(t *testing.T) {
	clk := &handClock{sec(100)}
	x := newHistory(HistoryOptions{}, clk.now)
	x.Observe(podHolding("A", false, "10.1.0.1"))
	for _, at := range []time.Time{
		time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(9999999999, 0),
		sec(200),
	} {
		if _, _, err := x.at("10.1.0.1", at, nil); !errors.Is(err, ErrInvalid) || errors.Is(err, ErrBeforeHistory) {
			t.Errorf("at %s: %v; expect in the future", at, err)
		}
	}
}

// TestHistoryBounds: retention and the cap evict the oldest closed
// intervals, count them, and move historySince.
func TestHistoryBounds(t *testing.T) {
	clk := &handClock{t0}
	x := newHistory(HistoryOptions{Retention: 100 * time.Second, MaxIntervals: 3}, clk.now)
	for i := range 6 {
		clk.t = sec(float64(10 * (i + 1)))
		x.Observe(podHolding(fmt.Sprint("P", i), false, fmt.Sprint("10.1.0.", i)))
		clk.t = sec(float64(10*(i+1) + 5))
		x.Observe(gone(podHolding(fmt.Sprint("P", i), false)))
	}
	st := x.Stats()
	if st.Intervals != 3 || st.EvictedByCap != 3 || st.Evicted != 3 || !st.Since.Equal(sec(35)) {
		t.Errorf("after the cap: %+v; expect 3 kept, 3 evicted by the cap, since +35s", st)
	}
	if _, _, err := x.at("10.1.0.0", sec(12), nil); !errors.Is(err, ErrBeforeHistory) {
		t.Errorf("an evicted moment: %v; expect beforeHistory", err)
	}
	if ans, _, err := x.at("10.1.0.4", sec(52.5), nil); ownersOf(ans, err) != "exact: P4" {
		t.Errorf("a kept moment: %s", ownersOf(ans, err))
	}
	clk.t = sec(200)
	x.Observe(podHolding("Q", false, "10.1.0.9"))
	if st := x.Stats(); st.Intervals != 1 || st.Evicted != 6 || !st.Since.Equal(sec(100)) {
		t.Errorf("after the retention: %+v; expect only Q's open interval, since +100s", st)
	}
}

// model is the brute force the history is held to: it replays the events
// up to a moment and reads who holds what then.
type model struct {
	claims map[string]map[Held]bool // uid → claim → active (false: superseded)
	who    map[string]who
}

func (m *model) apply(h Holding) {
	uid := h.Owner.UID
	m.who[uid] = who{kind: h.Owner.Kind, hostNetwork: h.Owner.HostNetwork, uid: uid}
	cur := m.claims[uid]
	if cur == nil {
		cur = map[Held]bool{}
		m.claims[uid] = cur
	}
	for k := range cur {
		if !slices.Contains(h.Held, k) {
			delete(cur, k)
		}
	}
	for _, k := range h.Held {
		if _, ok := cur[k]; ok {
			continue
		}
		w := m.who[uid]
		if exclusive(&w, k.Role) {
			for other, claims := range m.claims {
				o := m.who[other]
				for k2, active := range claims {
					if other != uid && k2.IP == k.IP && active && exclusive(&o, k2.Role) {
						claims[k2] = false
					}
				}
			}
		}
		cur[k] = true
	}
}

func (m *model) holders(ip string) []string {
	var out []string
	for uid, claims := range m.claims {
		for k, active := range claims {
			if active && k.IP == ip {
				out = append(out, uid+"/"+string(k.Role))
			}
		}
	}
	slices.Sort(out)
	return out
}

type histEvent struct {
	at int64
	h  Holding
}

// modelAt is the model after every event up to and including at.
func modelAt(events []histEvent, at int64) *model {
	m := &model{claims: map[string]map[Held]bool{}, who: map[string]who{}}
	for _, e := range events {
		if e.at > at {
			break
		}
		m.apply(e.h)
	}
	return m
}

// brute answers a moment by scanning the whole sequence: exact holders at
// t, or, when the holders of ip change within the skew of t, everyone who
// held it at any instant of [t-skew, t+skew] or just before a change in it.
func brute(events []histEvent, ip string, t, skew int64) (string, []string) {
	changed := false
	set := map[string]bool{}
	for _, h := range modelAt(events, t-skew).holders(ip) {
		set[h] = true
	}
	for i, e := range events {
		if e.at < t-skew || e.at > t+skew {
			continue
		}
		before, after := modelAt(events[:i], e.at).holders(ip), modelAt(events[:i+1], e.at).holders(ip)
		if !slices.Equal(before, after) {
			changed = true
		}
		for _, h := range slices.Concat(before, after) { // the owners on both sides of the change
			set[h] = true
		}
	}
	if !changed {
		return CertaintyExact, modelAt(events, t).holders(ip)
	}
	var out []string
	for h := range set {
		out = append(out, h)
	}
	slices.Sort(out)
	return CertaintyBoundary, out
}

// TestHistoryAgreesWithBruteForce: a history fed a random sequence of
// events answers every moment as a scan of the whole sequence does.
func TestHistoryAgreesWithBruteForce(t *testing.T) {
	ips := []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"}
	type kind struct {
		host bool
		svc  Role
	}
	kinds := []kind{{}, {}, {}, {host: true}, {svc: RoleClusterIP}, {svc: RoleExternalIP}}
	const skew = int64(2 * time.Second)
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 15))
		clk := &handClock{t0}
		x := newHistory(HistoryOptions{Skew: time.Duration(skew)}, clk.now)
		var events []histEvent
		at := t0.UnixNano()
		for range 5 + rng.IntN(30) {
			at += int64(time.Millisecond) * int64(1+rng.IntN(6000))
			uid := fmt.Sprint("u", rng.IntN(8))
			k := kinds[int(uid[1]-'0')%len(kinds)]
			var held []string
			if rng.IntN(5) > 0 {
				for _, ip := range ips {
					if rng.IntN(3) == 0 {
						held = append(held, ip)
					}
				}
			}
			h := podHolding(uid, k.host, held...)
			if k.svc != "" {
				h = svcHolding(uid, k.svc, held...)
			}
			events = append(events, histEvent{at, h})
			clk.t = time.Unix(0, at)
			x.Observe(h)
		}
		clk.t = time.Unix(0, at).Add(10 * time.Second)
		for range 40 {
			q := t0.UnixNano() + rng.Int64N(at-t0.UnixNano()+int64(3*time.Second))
			if rng.IntN(3) == 0 { // on, or just off, a change or a skew's edge
				e := events[rng.IntN(len(events))].at
				q = e + []int64{0, 1, -1, skew, -skew, skew + 1, -skew - 1}[rng.IntN(7)]
			}
			ip := ips[rng.IntN(len(ips))]
			wantCert, want := brute(events, ip, q, skew)
			ans, _, err := x.at(ip, time.Unix(0, q), nil)
			if errors.Is(err, ErrBeforeHistory) && q < t0.UnixNano() {
				continue
			}
			var got []string
			for _, o := range ans.Owners {
				got = append(got, o.UID+"/"+string(o.Role))
			}
			slices.Sort(got)
			got = slices.Compact(got) // an owner may have two intervals near a moment
			if len(want) == 0 && wantCert == CertaintyExact {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("seed %d: %s at %d: %v %v; expect nobody", seed, ip, q, got, err)
				}
				continue
			}
			if err != nil || ans.Certainty != wantCert || !slices.Equal(got, want) {
				for _, e := range events {
					t.Logf("+%d %s %v", e.at-t0.UnixNano(), e.h.Owner.UID, e.h.Held)
				}
				t.Fatalf("seed %d: %s at +%dns: %s %v (%v); expect %s %v", seed, ip, q-t0.UnixNano(), ans.Certainty, got, err, wantCert, want)
			}
			if !slices.IsSortedFunc(ans.Owners, func(a, b Interval) int { return a.From.Compare(b.From) }) {
				t.Fatalf("seed %d: owners not ordered by from: %+v", seed, ans.Owners)
			}
		}
	}
}

// TestIntervalNamesRoundTrip: an interval keeps its role and beginning
// as an index into roleNames and sinceNames, so every role and beginning
// an event or the file can give must be there.
func TestIntervalNamesRoundTrip(t *testing.T) {
	for _, r := range []Role{RolePodIP, RoleClusterIP, RoleExternalIP, RoleLoadBalancer, RoleNodeInternal, RoleNodeExternal} {
		if i, ok := nameIndex(roleNames[:], r); !ok || (&interval{role: i}).Role() != r {
			t.Errorf("role %q does not round-trip", r)
		}
	}
	for _, s := range []string{"", "creation", "start", "restart"} {
		if i, ok := nameIndex(sinceNames[:], s); !ok || (&interval{since: i}).Since() != s {
			t.Errorf("beginning %q does not round-trip", s)
		}
	}
	if _, ok := nameIndex(roleNames[:], Role("other")); ok {
		t.Error("an unknown role is found")
	}
}

// TestHistoryPortsAtAMoment: given two Services sharing an external IP,
// one declaring 80/TCP, the other 8080/TCP, and a pod holding another
// address (no ports), when asked at a moment with a port, then the
// answer narrows to the Service that declared it and the owners carry
// their ports; with a port nobody declared, both stay.
func TestHistoryPortsAtAMoment(t *testing.T) {
	clk := &handClock{sec(100)}
	x := newHistory(HistoryOptions{}, clk.now)
	web, api := svcHolding("W", RoleExternalIP, "10.9.0.1"), svcHolding("A", RoleExternalIP, "10.9.0.1")
	web.Ports, api.Ports = []Port{{80, "TCP"}}, []Port{{8080, "TCP"}}
	x.Observe(web)
	x.Observe(api)
	x.Observe(podHolding("P", false, "10.9.0.2"))
	clk.t = sec(300)
	ports := map[string][]Port{"W": web.Ports, "A": api.Ports, "P": nil}
	for _, c := range []struct {
		ip       string
		port     int32
		want     string
		narrowed bool
	}{
		{"10.9.0.1", 80, "W", true},
		{"10.9.0.1", 8080, "A", true},
		{"10.9.0.1", 443, "A W", false},
		{"10.9.0.2", 80, "P", false},
	} {
		var out Answer[*object]
		if err := LookupAt(x, Query{IP: c.ip, At: sec(150), Port: Port{c.port, "TCP"}}, &out); err != nil {
			t.Fatalf("%s port %d: %v", c.ip, c.port, err)
		}
		var uids []string
		for _, o := range out.History.Owners {
			uids = append(uids, o.UID)
			if !slices.Equal(o.Ports, ports[o.UID]) {
				t.Errorf("%s: %s's ports %v, want %v", c.ip, o.UID, o.Ports, ports[o.UID])
			}
		}
		slices.Sort(uids)
		if got := strings.Join(uids, " "); got != c.want || (out.Via == "port") != c.narrowed {
			t.Errorf("%s port %d: owners %q via %q; want %q, narrowed %v", c.ip, c.port, got, out.Via, c.want, c.narrowed)
		}
	}
}

// TestHistoryPortsChangeWhileHeld: given a hostNetwork pod holding an
// address with 8080, then updated to declare 9090, then none, while it
// keeps the address, when asked at moments before and after the change, then each
// answer carries the ports declared at that moment and a port narrows by
// them; the interval stays one, from when the pod took the address.
func TestHistoryPortsChangeWhileHeld(t *testing.T) {
	const ip = "10.9.0.5"
	clk := &handClock{sec(100)}
	x := newHistory(HistoryOptions{}, clk.now)
	p := podHolding("P", true, ip)
	p.Ports = []Port{{8080, "TCP"}}
	x.Observe(p)
	x.Observe(podHolding("Q", true, ip)) // another hostNetwork pod on the node, declaring nothing
	clk.t = sec(200)
	p.Ports = []Port{{9090, "TCP"}}
	x.Observe(p)
	clk.t = sec(300)
	p.Ports = nil // declares none any more
	x.Observe(p)
	clk.t = sec(400)
	for _, c := range []struct {
		at    float64
		port  int32
		ports []Port
		want  string // the owners' uids, or "" when the port is declared by none
	}{
		{150, 8080, []Port{{8080, "TCP"}}, "P"},
		{150, 9090, []Port{{8080, "TCP"}}, ""},
		{250, 9090, []Port{{9090, "TCP"}}, "P"},
		{250, 8080, []Port{{9090, "TCP"}}, ""},
		{350, 9090, nil, ""},
	} {
		var out Answer[*object]
		if err := LookupAt(x, Query{IP: ip, At: sec(c.at), Port: Port{c.port, "TCP"}}, &out); err != nil {
			t.Fatalf("at %gs port %d: %v", c.at, c.port, err)
		}
		var uids []string
		for _, o := range out.History.Owners {
			uids = append(uids, o.UID)
			if o.UID == "P" && (!slices.Equal(o.Ports, c.ports) || o.From != sec(100) || !o.To.IsZero()) {
				t.Errorf("at %gs: P declared %v from %s to %s; want %v from +100s, still held", c.at, o.Ports, o.From, o.To, c.ports)
			}
		}
		got := strings.Join(uids, " ")
		if c.want == "" {
			if out.Port == nil || out.Port.Declared || out.Via == "port" || got != "P Q" {
				t.Errorf("at %gs port %d: %q via %q, port %+v; want both, declared by none", c.at, c.port, got, out.Via, out.Port)
			}
		} else if got != c.want || out.Via != "port" || out.Port == nil || !out.Port.Declared {
			t.Errorf("at %gs port %d: %q via %q; want %q via port", c.at, c.port, got, out.Via, c.want)
		}
	}
	if st := x.Stats(); st.Intervals != 2 {
		t.Errorf("%d intervals; a change of ports makes no new one", st.Intervals)
	}
}
