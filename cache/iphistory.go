package cache

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/kubeindex/kubeindex/indexers"
)

// ErrBeforeHistory: the moment asked about is earlier than what the
// address history holds (410, as Kubernetes answers a resourceVersion too
// old). It is never answered with a guess.
var ErrBeforeHistory = errors.New("before the retained IP history")

// IPHistoryOptions bounds the history of address ownership. The zero value
// takes the documented defaults.
type IPHistoryOptions struct {
	// Off disables the history: answers at a moment are refused.
	Off bool
	// Retention is how long a closed interval is kept. Default
	// DefaultIPHistoryRetention.
	Retention time.Duration
	// Skew is how near a change a moment must be to be answered as a
	// boundary, with the owners on both sides. Default DefaultIPHistorySkew.
	Skew time.Duration
	// Dir, when set, keeps the history in a file there (bbolt), so that
	// it survives a restart; the time kubeindex was down is a gap.
	Dir string
	// MaxIntervals caps the intervals kept (about 200 bytes each); the
	// oldest closed ones go first, and the history then starts later.
	// Default DefaultIPHistoryMaxIntervals.
	MaxIntervals int
}

// IPHistoryOptions' defaults.
const (
	DefaultIPHistoryRetention    = time.Hour
	DefaultIPHistorySkew         = 2 * time.Second
	DefaultIPHistoryMaxIntervals = 1_000_000
)

func (o IPHistoryOptions) withDefaults() IPHistoryOptions {
	if o.Retention <= 0 {
		o.Retention = DefaultIPHistoryRetention
	}
	if o.Skew <= 0 {
		o.Skew = DefaultIPHistorySkew
	}
	if o.MaxIntervals <= 0 {
		o.MaxIntervals = DefaultIPHistoryMaxIntervals
	}
	return o
}

// Certainty of an answer at a moment.
const (
	// CertaintyExact: the moment is inside observed intervals, away from
	// any change by more than the skew.
	CertaintyExact = "exact"
	// CertaintyBoundary: the moment is within the skew of a change; the
	// owners on both sides are given, ordered by when they began.
	CertaintyBoundary = "boundary"
)

// IPOwner is one interval during which an object held an address.
type IPOwner struct {
	Kind        string        `json:"kind"`
	Namespace   string        `json:"namespace,omitempty"`
	Name        string        `json:"name"`
	UID         string        `json:"uid"`
	Role        indexers.Role `json:"role"`
	HostNetwork bool          `json:"hostNetwork,omitempty"`
	From        time.Time     `json:"from"`
	// To is zero while the object still holds the address.
	To time.Time `json:"to,omitzero"`
	// Since is "creation" or "start" for an owner present when the
	// history began: From is then its metadata.creationTimestamp or
	// status.startTime, not an observed change; "restart" when a restored
	// history found it holding the address after a restart: From is then
	// when the last run stopped observing.
	Since string `json:"since,omitempty"`
}

// IPHistoryAnswer is who held an address at a moment.
type IPHistoryAnswer struct {
	At        time.Time
	Certainty string
	// Since is the earliest moment the history can answer for.
	Since  time.Time
	Owners []IPOwner
}

// IPHistoryStats are the history's figures, for metrics.
type IPHistoryStats struct {
	Addresses, Intervals, Open int
	// Evicted counts intervals dropped by retention or by the cap.
	Evicted, EvictedByCap uint64
	Since                 time.Time
	// Persistent is set with --ip-history-dir; WriteErrors counts failed
	// flushes to it.
	Persistent  bool
	WriteErrors uint64
}

// ipOwner is what the history keeps of an object: shared by its intervals.
type ipOwner struct {
	kind, namespace, name, uid string
	hostNetwork                bool
}

// interval: owner held ip in role from from to to (unix nanoseconds,
// half-open; to == 0: still held).
type interval struct {
	id    uint64 // its key in the store
	ip    string
	who   *ipOwner
	role  indexers.Role
	from  int64
	to    int64
	since string
	ports []indexers.Port // of hostNetwork pods and Services, for ?port
}

// heldKey is an address an owner claims, in a role.
type heldKey = indexers.Held

// ipHistory records, from the informer events, which object held which
// address when. Each object is known by its UID: an event about one UID
// opens and closes that UID's intervals only, so a late delete of an old
// owner never ends a newer owner's interval, and a pod recreated under the
// same name is a new interval. A pod (not hostNetwork) or a Service
// ClusterIP taking an address ends whichever pod or ClusterIP held it
// before: two cannot hold it at once, so the older owner's release has
// simply not been seen yet. Safe for concurrent use; observe does a few
// map operations under the lock.
type ipHistory struct {
	opts IPHistoryOptions
	now  func() time.Time

	mu      sync.RWMutex
	started int64
	byIP    map[string][]*interval
	// open: per UID, the addresses it claims, each with its open
	// interval, or nil when another owner superseded it while it still
	// claims it.
	open     map[string][]claim
	closed   []*interval // in closing order, for eviction
	head     int
	count    int
	horizon  int64 // the latest end of an interval the cap evicted
	evicted  atomic.Uint64
	capEvict atomic.Uint64

	// Persistence (iphistory_store.go); db is nil without a Dir.
	db      *bolt.DB
	nextID  uint64
	pending map[*interval]bool // to write at the next flush (true: to delete)
	// unseen are the UIDs with restored open intervals no event has
	// mentioned since the restart (nil once reconciled).
	unseen      map[string]bool
	gaps        [][2]int64 // [from, to): nobody observed
	writeErrors atomic.Uint64
}

func newIPHistory(opts IPHistoryOptions, now func() time.Time) *ipHistory {
	return &ipHistory{opts: opts.withDefaults(), now: now, started: now().UnixNano(),
		byIP: map[string][]*interval{}, open: map[string][]claim{}}
}

// claim is an address an owner claims, with its open interval (nil once
// superseded). An owner claims one or two addresses: a slice of them
// costs a tenth of a map per owner, and a scan of two is no slower.
type claim struct {
	key heldKey
	iv  *interval
}

// claimIndex is the position of k in claims, -1 when it is not there.
func claimIndex(claims []claim, k heldKey) int {
	return slices.IndexFunc(claims, func(c claim) bool { return c.key == k })
}

// holding is what one event says an object holds, computed before the
// lock is taken.
type holding struct {
	who   ipOwner
	held  []indexers.Held
	ports []indexers.Port
	// begin is, for an object of the initial list, when it began holding
	// its addresses (creation or start), and since says which.
	begin int64
	since string
	// node is a pod's node, for the address stream's node filter.
	node string
	// pod and podIPs are a pod's summary and all its podIPs, completed or
	// not, for the owner table.
	pod    IPPod
	podIPs []string
}

// holdingOf reads what o holds: a pod its podIPs while it has not
// completed, a Service and a Node their addresses.
func holdingOf(kind string, o *Object, initial bool) holding {
	h := holding{who: ipOwner{kind: kindNames[kind], namespace: o.namespace, name: o.name, uid: o.uid}}
	switch kind {
	case "pods":
		p := summarisePod(o)
		h.who.hostNetwork, h.node = p.HostNetwork, p.NodeName
		h.pod, h.podIPs = p, indexers.PodIPsOf(o.doc("status"))
		if p.Active {
			for _, ip := range h.podIPs {
				h.held = append(h.held, indexers.Held{IP: ip, Role: indexers.RolePodIP})
			}
		}
		if p.HostNetwork && len(h.held) > 0 {
			h.ports = declaredPorts(kind, o)
		}
	case "services":
		h.held = heldBy(kind, o)
		if len(h.held) > 0 {
			h.ports = declaredPorts(kind, o)
		}
	default:
		h.held = heldBy(kind, o)
	}
	if initial && len(h.held) > 0 {
		h.begin, h.since = o.startedAt(kind)
	}
	return h
}

var kindNames = map[string]string{"pods": "Pod", "services": "Service", "nodes": "Node"}

// observe records that the object h describes now holds h.held (nothing,
// when deleted).
func (x *ipHistory) observe(h holding) {
	now := x.now().UnixNano()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.unseen != nil {
		delete(x.unseen, h.who.uid)
	}
	cur := slices.DeleteFunc(x.open[h.who.uid], func(c claim) bool {
		if slices.Contains(h.held, c.key) {
			return false
		}
		if c.iv != nil {
			x.closeLocked(c.iv, now)
		}
		return true
	})
	var who *ipOwner
	for _, e := range h.held {
		k := e
		if i := claimIndex(cur, k); i >= 0 {
			if iv := cur[i].iv; iv != nil && h.ports != nil && !slices.Equal(iv.ports, h.ports) {
				iv.ports = h.ports
				x.dirtyLocked(iv, false)
			}
			continue
		}
		if who == nil {
			w := h.who
			who = &w
		}
		from, since := now, ""
		if h.since != "" && h.begin != 0 && h.begin < now {
			from, since = h.begin, h.since
			if g := x.lastGapStart(); from < g { // restored: it was not holding this when the last run ended
				from, since = g, "restart"
			}
		}
		x.supersedeLocked(k, who, now)
		iv := &interval{id: x.nextID, ip: e.IP, who: who, role: e.Role, from: from, since: since, ports: h.ports}
		x.nextID++
		x.dirtyLocked(iv, false)
		x.byIP[e.IP] = append(x.byIP[e.IP], iv)
		x.count++
		cur = append(cur, claim{key: k, iv: iv})
	}
	if len(cur) == 0 {
		delete(x.open, h.who.uid)
	} else {
		x.open[h.who.uid] = cur
	}
	x.evictLocked(now)
}

func (x *ipHistory) lastGapStart() int64 {
	if len(x.gaps) == 0 {
		return 0
	}
	return x.gaps[len(x.gaps)-1][0]
}

// exclusive reports whether an owner in this role excludes every other
// exclusive owner of the address.
func exclusive(who *ipOwner, role indexers.Role) bool {
	return role == indexers.RoleClusterIP || role == indexers.RolePodIP && !who.hostNetwork
}

func (x *ipHistory) supersedeLocked(k heldKey, who *ipOwner, now int64) {
	if !exclusive(who, k.Role) {
		return
	}
	for _, iv := range x.byIP[k.IP] {
		if iv.to == 0 && iv.who.uid != who.uid && exclusive(iv.who, iv.role) {
			x.closeLocked(iv, now)
			claims := x.open[iv.who.uid]
			if i := claimIndex(claims, heldKey{IP: iv.ip, Role: iv.role}); i >= 0 {
				claims[i].iv = nil
			}
		}
	}
}

func (x *ipHistory) closeLocked(iv *interval, now int64) {
	iv.to = max(now, iv.from+1) // never empty: it was observed
	x.closed = append(x.closed, iv)
	x.dirtyLocked(iv, false)
}

// evictLocked drops the intervals that ended before the retention, and
// the oldest closed ones beyond the cap.
func (x *ipHistory) evictLocked(now int64) {
	limit := now - int64(x.opts.Retention)
	for x.head < len(x.closed) {
		iv := x.closed[x.head]
		if iv.to >= limit && x.count <= x.opts.MaxIntervals {
			break
		}
		if iv.to >= limit {
			x.horizon = max(x.horizon, iv.to)
			x.capEvict.Add(1)
		}
		x.closed[x.head] = nil
		x.head++
		x.removeLocked(iv)
	}
	if x.head > 1024 && x.head*2 > len(x.closed) {
		x.closed = slices.Clone(x.closed[x.head:])
		x.head = 0
	}
}

func (x *ipHistory) removeLocked(iv *interval) {
	line := x.byIP[iv.ip]
	if i := slices.Index(line, iv); i >= 0 {
		line = slices.Delete(line, i, i+1)
	}
	if len(line) == 0 {
		delete(x.byIP, iv.ip)
	} else {
		x.byIP[iv.ip] = line
	}
	x.count--
	x.evicted.Add(1)
	x.dirtyLocked(iv, true)
}

// sinceLocked is the earliest moment answered: when the history began,
// the retention's reach, and the end of what the cap evicted.
func (x *ipHistory) sinceLocked(now int64) int64 {
	return max(x.started, now-int64(x.opts.Retention), x.horizon)
}

// at answers who held ip (normalised) at t. Intervals are half-open: at
// the instant of a change the new owner holds the address. visible, when
// set, keeps only the owners it accepts, before the certainty is decided.
func (x *ipHistory) at(ip string, t time.Time, visible func(kind, namespace string) bool) (IPHistoryAnswer, []*interval, error) {
	now := x.now().UnixNano()
	x.mu.RLock()
	defer x.mu.RUnlock()
	since := x.sinceLocked(now)
	ans := IPHistoryAnswer{At: t, Since: time.Unix(0, since).UTC()}
	at, skew := t.UnixNano(), int64(x.opts.Skew)
	if at < since {
		return ans, nil, fmt.Errorf("%w: %s is before %s, the earliest moment the IP history holds", ErrBeforeHistory,
			t.UTC().Format(time.RFC3339Nano), ans.Since.Format(time.RFC3339Nano))
	}
	for _, g := range x.gaps {
		if g[0] <= at && at < g[1] {
			return ans, nil, fmt.Errorf("%w: kubeindex was not observing from %s to %s (it was not running)", ErrBeforeHistory,
				time.Unix(0, g[0]).UTC().Format(time.RFC3339Nano), time.Unix(0, g[1]).UTC().Format(time.RFC3339Nano))
		}
	}
	if at > now+skew {
		return ans, nil, fmt.Errorf("%w: at %s is in the future", ErrInvalid, t.UTC().Format(time.RFC3339Nano))
	}
	var exact, near []*interval
	boundary := false
	for _, iv := range x.byIP[ip] {
		if visible != nil && !visible(iv.who.kind, iv.who.namespace) {
			continue
		}
		if iv.from <= at && (iv.to == 0 || iv.to > at) {
			exact = append(exact, iv)
		}
		if iv.from <= at+skew && (iv.to == 0 || iv.to >= at-skew) { // touches [at-skew, at+skew]
			near = append(near, iv)
			boundary = boundary || abs(iv.from-at) <= skew || iv.to != 0 && abs(iv.to-at) <= skew
		}
	}
	ans.Certainty, ans.Owners = CertaintyExact, nil
	found := exact
	if boundary {
		ans.Certainty, found = CertaintyBoundary, near
	}
	slices.SortStableFunc(found, func(a, b *interval) int { return compareInt(a.from, b.from) })
	for _, iv := range found {
		ans.Owners = append(ans.Owners, iv.owner())
	}
	if len(found) == 0 {
		return ans, nil, fmt.Errorf("nobody held %s at %s: %w", ip, t.UTC().Format(time.RFC3339Nano), ErrNotFound)
	}
	return ans, found, nil
}

func (iv *interval) owner() IPOwner {
	o := IPOwner{Kind: iv.who.kind, Namespace: iv.who.namespace, Name: iv.who.name, UID: iv.who.uid,
		Role: iv.role, HostNetwork: iv.who.hostNetwork, From: time.Unix(0, iv.from).UTC(), Since: iv.since}
	if iv.to != 0 {
		o.To = time.Unix(0, iv.to).UTC()
	}
	return o
}

func (x *ipHistory) stats() IPHistoryStats {
	now := x.now().UnixNano()
	x.mu.RLock()
	defer x.mu.RUnlock()
	var open int
	for _, held := range x.open {
		open += len(held)
	}
	return IPHistoryStats{Addresses: len(x.byIP), Intervals: x.count, Open: open,
		Evicted: x.evicted.Load(), EvictedByCap: x.capEvict.Load(), Since: time.Unix(0, x.sinceLocked(now)).UTC(),
		Persistent: x.db != nil, WriteErrors: x.writeErrors.Load()}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
