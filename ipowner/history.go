package ipowner

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// HistoryOptions bounds the history of address ownership. The zero value
// takes the documented defaults.
type HistoryOptions struct {
	// Off disables the history: answers at a moment are refused.
	Off bool
	// Retention is how long a closed interval is kept. Default DefaultHistoryRetention.
	Retention time.Duration
	// Skew is how near a change a moment must be to be answered as a
	// boundary, with the owners on both sides. Default DefaultHistorySkew.
	Skew time.Duration
	// Dir, when set, keeps the history in a file there (bbolt), so that
	// it survives a restart; the time kubeindex was down is a gap.
	Dir string
	// MaxIntervals caps the intervals kept (about 200 bytes each); the
	// oldest closed ones go first, and the history then starts later.
	// Default DefaultHistoryMaxIntervals.
	MaxIntervals int
}

// HistoryOptions' defaults.
const (
	DefaultHistoryRetention    = time.Hour
	DefaultHistorySkew         = 2 * time.Second
	DefaultHistoryMaxIntervals = 1_000_000
)

func (o HistoryOptions) withDefaults() HistoryOptions {
	if o.Retention <= 0 {
		o.Retention = DefaultHistoryRetention
	}
	if o.Skew <= 0 {
		o.Skew = DefaultHistorySkew
	}
	if o.MaxIntervals <= 0 {
		o.MaxIntervals = DefaultHistoryMaxIntervals
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

// Interval is one interval during which an owner held an address.
type Interval struct {
	Owner
	From time.Time
	// To is zero while the owner still holds the address.
	To time.Time
	// Since is "creation" or "start" for an owner present when the
	// history began: From is then its metadata.creationTimestamp or
	// status.startTime, not an observed change; "restart" when a restored
	// history found it holding the address after a restart: From is then
	// when the last run stopped observing.
	Since string
}

// HistoryAnswer is who held an address at a moment.
type HistoryAnswer struct {
	At        time.Time
	Certainty string
	// Since is the earliest moment the history can answer for.
	Since  time.Time
	Owners []Interval
}

// HistoryStats are the history's figures, for metrics.
type HistoryStats struct {
	Addresses, Intervals, Open int
	// Evicted counts intervals dropped by retention or by the cap.
	Evicted, EvictedByCap uint64
	Since                 time.Time
	// Persistent is set with --ip-history-dir; WriteErrors counts failed
	// flushes to it.
	Persistent  bool
	WriteErrors uint64
}

// who is what the history keeps of an owner, shared by its intervals:
// the members of an Owner an answer at a moment gives besides the role,
// packed (there is one per object that ever held an address in the
// retention; BenchmarkIPHistoryMemory).
type who struct {
	kind                 Kind
	hostNetwork          bool
	namespace, name, uid string
}

// interval: owner held ip in role from from to to (unix nanoseconds,
// half-open; to == 0: still held).
type interval struct {
	id   uint64 // its key in the store
	ip   string
	who  *who
	from int64
	to   int64
	// ports are those of a hostNetwork pod or a Service, for ?port (Ports
	// says them); nil for others, most intervals: a pointer is a third
	// of a slice, and makes an interval 64 bytes.
	ports *[]Port
	// role and since are one of a few names each, kept as a byte (there
	// is an interval per owner and address): Role and Since say them.
	role  uint8
	since uint8
}

// roleNames and sinceNames are what an interval's role and since hold
// the index of.
var (
	roleNames  = [...]Role{"", RolePodIP, RoleClusterIP, RoleExternalIP, RoleLoadBalancer, RoleNodeInternal, RoleNodeExternal}
	sinceNames = [...]string{"", "creation", "start", "restart"}
)

// nameIndex is the index of name in names; ok is false when it is not
// there.
func nameIndex[S ~string](names []S, name S) (uint8, bool) {
	i := slices.Index(names, name)
	return uint8(max(i, 0)), i >= 0
}

func (iv *interval) Role() Role { return roleNames[iv.role] }
func (iv *interval) Ports() []Port {
	if iv.ports == nil {
		return nil
	}
	return *iv.ports
}

// portSpan is what an owner declared before its ports changed while it
// held the address: ports, until the change (unix nanoseconds).
type portSpan struct {
	until int64
	ports []Port
}

// portsAtLocked is what iv's owner declared at at: its current ports, or
// those of the earlier span that moment falls in. x.mu must be held.
func (x *History) portsAtLocked(iv *interval, at int64) []Port {
	for _, s := range x.portsBefore[iv] {
		if at < s.until {
			return s.ports
		}
	}
	return iv.Ports()
}

// setPortsLocked records that iv's owner declares ports from now on,
// keeping what it declared before for moments the history still answers
// (the change's time splits the interval's ports, not the interval).
// x.mu must be held.
func (x *History) setPortsLocked(iv *interval, ports []Port, now int64) {
	before := x.portsBefore[iv]
	start := iv.from
	if len(before) > 0 {
		start = before[len(before)-1].until
	}
	if now > start {
		before = append(before, portSpan{until: now, ports: iv.Ports()})
	}
	limit := x.sinceLocked(now)
	before = slices.DeleteFunc(before, func(s portSpan) bool { return s.until <= limit })
	if len(before) == 0 {
		delete(x.portsBefore, iv)
	} else {
		x.portsBefore[iv] = before
	}
	iv.ports = portsOf(ports)
}

// portsOf is what an interval keeps of ports.
func portsOf(ports []Port) *[]Port {
	if ports == nil {
		return nil
	}
	return &ports
}
func (iv *interval) Since() string { return sinceNames[iv.since] }

// History records, from the informer events, which object held which
// address when. Each object is known by its UID: an event about one UID
// opens and closes that UID's intervals only, so a late delete of an old
// owner never ends a newer owner's interval, and a pod recreated under the
// same name is a new interval. A pod (not hostNetwork) or a Service
// ClusterIP taking an address ends whichever pod or ClusterIP held it
// before: two cannot hold it at once, so the older owner's release has
// simply not been seen yet. Safe for concurrent use; observe does a few
// map operations under the lock.
type History struct {
	opts HistoryOptions
	now  func() time.Time

	mu      sync.RWMutex
	started int64
	byIP    map[string][]*interval
	// open: per UID, the addresses it claims, each with its open
	// interval, or nil when another owner superseded it while it still
	// claims it.
	open map[string][]claim
	// portsBefore: for the few intervals whose owner changed its ports
	// while holding the address, what it declared before, oldest first.
	portsBefore map[*interval][]portSpan
	closed      []*interval // in closing order, for eviction
	head        int
	count       int
	horizon     int64 // the latest end of an interval the cap evicted
	evicted     atomic.Uint64
	capEvict    atomic.Uint64

	// Persistence (history_store.go); db is nil without a Dir.
	db      *bolt.DB
	nextID  uint64
	pending map[*interval]bool // to write at the next flush (true: to delete)
	// unseen are the UIDs with restored open intervals no event has
	// mentioned since the restart (nil once reconciled).
	unseen      map[string]bool
	gaps        [][2]int64 // [from, to): nobody observed
	writeErrors atomic.Uint64
}

// NewHistory makes a history; with opts.Dir it opens (or creates) its
// file there and loads what it holds. Run keeps the file; it is closed
// when Run's context ends.
func NewHistory(opts HistoryOptions, now func() time.Time) (*History, error) {
	x := newHistory(opts, now)
	if opts.Dir != "" {
		if err := x.openStore(opts.Dir); err != nil {
			return nil, err
		}
	}
	return x, nil
}

func newHistory(opts HistoryOptions, now func() time.Time) *History {
	return &History{opts: opts.withDefaults(), now: now, started: now().UnixNano(),
		byIP: map[string][]*interval{}, open: map[string][]claim{},
		portsBefore: map[*interval][]portSpan{}}
}

// Reserve makes room for n owners in a history that holds none (see
// Table.Reserve): a restored one holds some, and is left as it is. Safe
// for concurrent use.
func (x *History) Reserve(n int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.byIP) == 0 && len(x.open) == 0 {
		x.byIP, x.open = make(map[string][]*interval, n), make(map[string][]claim, n)
	}
}

// claim is an address an owner claims (ip, in the role roleNames[role]),
// with its open interval (nil once superseded). An owner claims one or
// two addresses: a slice of them costs a tenth of a map per owner, and a
// scan of two is no slower. The role is a byte, as an interval's: there
// is a claim per object holding an address.
type claim struct {
	ip   string
	iv   *interval
	role uint8
}

func (c claim) is(k Held) bool { return c.ip == k.IP && roleNames[c.role] == k.Role }

// claimIndex is the position of k in claims, -1 when it is not there.
func claimIndex(claims []claim, k Held) int {
	return slices.IndexFunc(claims, func(c claim) bool { return c.is(k) })
}

// Observe records that the object h describes now holds h.Held (nothing,
// when deleted).
func (x *History) Observe(h Holding) {
	now := x.now().UnixNano()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.unseen != nil {
		delete(x.unseen, h.Owner.UID)
	}
	cur := slices.DeleteFunc(x.open[h.Owner.UID], func(c claim) bool {
		if slices.ContainsFunc(h.Held, c.is) {
			return false
		}
		if c.iv != nil {
			x.closeLocked(c.iv, now)
		}
		return true
	})
	var w *who
	for _, e := range h.Held {
		k := e
		if i := claimIndex(cur, k); i >= 0 {
			if iv := cur[i].iv; iv != nil && !slices.Equal(iv.Ports(), h.Ports) {
				x.setPortsLocked(iv, h.Ports, now)
				x.dirtyLocked(iv, false)
			}
			continue
		}
		if w == nil {
			o := &h.Owner
			w = &who{kind: o.Kind, hostNetwork: o.HostNetwork, namespace: o.Namespace, name: o.Name, uid: o.UID}
		}
		from, since := now, ""
		if h.Since != "" && h.Begin != 0 && h.Begin < now {
			from, since = h.Begin, h.Since
			if g := x.lastGapStart(); from < g { // restored: it was not holding this when the last run ended
				from, since = g, "restart"
			}
		}
		x.supersedeLocked(k, w, now)
		role, _ := nameIndex(roleNames[:], e.Role) // the roles an event holds are this package's
		code, _ := nameIndex(sinceNames[:], since)
		iv := &interval{id: x.nextID, ip: e.IP, who: w, role: role, from: from, since: code, ports: portsOf(h.Ports)}
		x.nextID++
		x.dirtyLocked(iv, false)
		x.byIP[e.IP] = append(x.byIP[e.IP], iv)
		x.count++
		cur = append(cur, claim{ip: e.IP, iv: iv, role: role})
	}
	if len(cur) == 0 {
		delete(x.open, h.Owner.UID)
	} else {
		x.open[h.Owner.UID] = cur
	}
	x.evictLocked(now)
}

func (x *History) lastGapStart() int64 {
	if len(x.gaps) == 0 {
		return 0
	}
	return x.gaps[len(x.gaps)-1][0]
}

// exclusive reports whether an owner in this role excludes every other
// exclusive owner of the address.
func exclusive(w *who, role Role) bool {
	return role == RoleClusterIP || role == RolePodIP && !w.hostNetwork
}

func (x *History) supersedeLocked(k Held, w *who, now int64) {
	if !exclusive(w, k.Role) {
		return
	}
	for _, iv := range x.byIP[k.IP] {
		if iv.to == 0 && iv.who.uid != w.uid && exclusive(iv.who, iv.Role()) {
			x.closeLocked(iv, now)
			claims := x.open[iv.who.uid]
			if i := claimIndex(claims, Held{IP: iv.ip, Role: iv.Role()}); i >= 0 {
				claims[i].iv = nil
			}
		}
	}
}

func (x *History) closeLocked(iv *interval, now int64) {
	iv.to = max(now, iv.from+1) // never empty: it was observed
	x.closed = append(x.closed, iv)
	x.dirtyLocked(iv, false)
}

// evictLocked drops the intervals that ended before the retention, and
// the oldest closed ones beyond the cap.
func (x *History) evictLocked(now int64) {
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

func (x *History) removeLocked(iv *interval) {
	line := x.byIP[iv.ip]
	if i := slices.Index(line, iv); i >= 0 {
		line = slices.Delete(line, i, i+1)
	}
	if len(line) == 0 {
		delete(x.byIP, iv.ip)
	} else {
		x.byIP[iv.ip] = line
	}
	delete(x.portsBefore, iv)
	x.count--
	x.evicted.Add(1)
	x.dirtyLocked(iv, true)
}

// sinceLocked is the earliest moment answered: when the history began,
// the retention's reach, and the end of what the cap evicted.
func (x *History) sinceLocked(now int64) int64 {
	return max(x.started, now-int64(x.opts.Retention), x.horizon)
}

// at answers who held ip (normalised) at t. Intervals are half-open: at
// the instant of a change the new owner holds the address. visible, when
// set, keeps only the owners it accepts, before the certainty is decided.
func (x *History) at(ip string, t time.Time, visible func(Kind, string) bool) (HistoryAnswer, []*interval, error) {
	now := x.now().UnixNano()
	x.mu.RLock()
	defer x.mu.RUnlock()
	since := x.sinceLocked(now)
	ans := HistoryAnswer{At: t, Since: time.Unix(0, since).UTC()}
	skew := int64(x.opts.Skew)
	// Compared as times first: past the year 2262 UnixNano overflows, and
	// a moment far in the future would read as one before the history.
	if t.After(time.Unix(0, now+skew)) {
		return ans, nil, fmt.Errorf("%w: at %s is in the future", ErrInvalid, t.UTC().Format(time.RFC3339Nano))
	}
	at := t.UnixNano()
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
		o := iv.owner()
		o.Ports = x.portsAtLocked(iv, at)
		ans.Owners = append(ans.Owners, o)
	}
	if len(found) == 0 {
		return ans, nil, fmt.Errorf("nobody held %s at %s: %w", ip, t.UTC().Format(time.RFC3339Nano), ErrNotFound)
	}
	return ans, found, nil
}

func (iv *interval) owner() Interval {
	w := iv.who
	o := Interval{Owner: Owner{Kind: w.kind, Namespace: w.namespace, Name: w.name, UID: w.uid, Role: iv.Role(),
		HostNetwork: w.hostNetwork, Ports: iv.Ports()}, From: time.Unix(0, iv.from).UTC(), Since: iv.Since()}
	if iv.to != 0 {
		o.To = time.Unix(0, iv.to).UTC()
	}
	return o
}

// Stats are the history's figures, for metrics. Safe for concurrent use.
func (x *History) Stats() HistoryStats {
	now := x.now().UnixNano()
	x.mu.RLock()
	defer x.mu.RUnlock()
	var open int
	for _, held := range x.open {
		open += len(held)
	}
	return HistoryStats{Addresses: len(x.byIP), Intervals: x.count, Open: open,
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
