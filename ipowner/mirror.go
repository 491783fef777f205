package ipowner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubeindex/kubeindex/internal/replay"
)

// MirrorOptions bounds the mirror's history and paces its bookmarks, as
// the event streams' options do; every field must be set.
type MirrorOptions struct {
	// HistorySize and HistoryAge bound the changes kept for resuming.
	HistorySize int
	HistoryAge  time.Duration
	// BookmarkInterval is how often a subscription that received nothing
	// gets a BOOKMARK with the current position.
	BookmarkInterval time.Duration
}

// change is one change of an address's owner set, as the mirror
// published it. Its message with every owner is encoded once, lazily,
// and shared by the subscribers that see every owner.
type change struct {
	seq      uint64
	ip       string
	old, cur []mirrorOwner
	at       time.Time
	once     sync.Once
	all      []byte
}

// Mirror keeps who holds each address now, fed by the cache's one
// informer handler per shard (Observe), and streams it: a snapshot of the
// owned addresses, then each change of an address's owner set, in the
// order the mirror saw them, numbered by its own sequence. The events of
// pods, Services and nodes come from different informers; the sequence
// is the one order they are applied in, so a snapshot and the changes
// after its position have neither gap nor overlap.
//
// An owner here is what an agent keeps: kind, names, UID, role and, of a
// pod, hostNetwork and its node; pods count while they are active, as
// the lookups count them. Positions are "<epoch>-<seq>": the epoch is
// drawn at start-up, so a position from another replica or an earlier
// run is never taken for one of ours. Everything happens under mu, and
// nothing done under it blocks: a subscriber whose queue is full is
// ended (replay.Fanout). Safe for concurrent use.
type Mirror struct {
	now   func() time.Time
	opts  MirrorOptions
	epoch string

	mu     sync.Mutex
	owners map[string][]mirrorOwner // ip → owners, ordered (sortOwners)
	holds  map[string][]Held        // uid → what it holds
	// log is the history for resuming; its positions are the sequence
	// (the head is the last change's).
	log  *replay.Log[*change]
	subs replay.Fanout[*MirrorSub, delivery]
}

// NewMirror makes a mirror; Run sends its bookmarks.
func NewMirror(now func() time.Time, opts MirrorOptions) *Mirror {
	var b [6]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return &Mirror{now: now, opts: opts, epoch: hex.EncodeToString(b[:]),
		owners: map[string][]mirrorOwner{}, holds: map[string][]Held{},
		log: replay.NewLog[*change](opts.HistorySize, opts.HistoryAge)}
}

// Reserve makes room for n owners in a mirror that holds none (see
// Table.Reserve). Safe for concurrent use.
func (m *Mirror) Reserve(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.owners) == 0 && len(m.holds) == 0 {
		m.owners, m.holds = make(map[string][]mirrorOwner, n), make(map[string][]Held, n)
	}
}

func (m *Mirror) position(seq uint64) string {
	return m.epoch + "-" + strconv.FormatUint(seq, 10)
}

// parsePosition reads a position this server may have sent. ours is false
// for a well-formed position of another epoch.
func (m *Mirror) parsePosition(p string) (seq uint64, ours bool, err error) {
	epoch, n, ok := strings.Cut(p, "-")
	seq, perr := strconv.ParseUint(n, 10, 64)
	if !ok || perr != nil || len(epoch) != len(m.epoch) || strings.Trim(epoch, "0123456789abcdef") != "" {
		return 0, false, fmt.Errorf("%w: resourceVersion %q is not a position of the address stream (they look like %q)",
			ErrInvalid, p, m.position(42))
	}
	return seq, epoch == m.epoch, nil
}

// mirrorOwner is what the mirror keeps of an owner of an address: an
// Owner less the phase and ports the stream never sends, its role a byte
// (roleNames). There is one per address held, so it is kept small; the
// encoder is given the Owner back (owner).
type mirrorOwner struct {
	namespace, name, uid, nodeName string
	kind                           Kind
	hostNetwork                    bool
	role                           uint8
}

func (o *mirrorOwner) owner() Owner {
	return Owner{Kind: o.kind, HostNetwork: o.hostNetwork, Namespace: o.namespace, Name: o.name, UID: o.uid,
		Role: roleNames[o.role], NodeName: o.nodeName}
}

// sortOwners orders an address's owners as the lookups list them: pods,
// then Services, then nodes; each by namespace/name, then role and UID.
func sortOwners(owners []mirrorOwner) {
	slices.SortFunc(owners, func(a, b mirrorOwner) int {
		if c := int(a.kind) - int(b.kind); c != 0 {
			return c
		}
		for _, c := range []int{strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name),
			strings.Compare(string(roleNames[a.role]), string(roleNames[b.role])), strings.Compare(a.uid, b.uid)} {
			if c != 0 {
				return c
			}
		}
		return 0
	})
}

// sameOwners reports whether two owner sets are the same.
func sameOwners(a, b []mirrorOwner) bool { return slices.Equal(a, b) }

// Observe records that the object h describes now holds h.Held (nothing,
// when deleted), and publishes each address whose owner set changed.
func (m *Mirror) Observe(h Holding) {
	uid := h.Owner.UID
	owner := mirrorOwner{kind: h.Owner.Kind, namespace: h.Owner.Namespace, name: h.Owner.Name, uid: uid,
		hostNetwork: h.Owner.HostNetwork, nodeName: h.Owner.NodeName}
	held := h.Held // kept as it is when each is there once (the common case): not copied per object
	for i, e := range h.Held {
		if slices.Contains(h.Held[:i], e) {
			held = nil
			for _, e := range h.Held {
				if !slices.Contains(held, e) {
					held = append(held, e)
				}
			}
			break
		}
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.holds[uid]
	var touched []string
	for _, e := range append(slices.Clip(prev), held...) {
		if !slices.Contains(touched, e.IP) {
			touched = append(touched, e.IP)
		}
	}
	for _, ip := range touched {
		old := m.owners[ip]
		cur := make([]mirrorOwner, 0, len(old)+1)
		for _, o := range old {
			if o.uid != uid {
				cur = append(cur, o)
			}
		}
		for _, e := range held {
			if e.IP == ip {
				o := owner
				o.role, _ = nameIndex(roleNames[:], e.Role) // the roles held are this package's
				cur = append(cur, o)
			}
		}
		sortOwners(cur)
		if sameOwners(old, cur) {
			continue
		}
		if len(cur) == 0 {
			cur = nil
			delete(m.owners, ip)
		} else {
			m.owners[ip] = cur
		}
		m.publishLocked(&change{ip: ip, old: old, cur: cur, at: now})
	}
	if len(held) == 0 {
		delete(m.holds, uid)
	} else {
		m.holds[uid] = held
	}
}

// publishLocked numbers ch, keeps it in the history and offers it to
// every subscriber that sees a change in it.
func (m *Mirror) publishLocked(ch *change) {
	ch.seq = m.log.Head() + 1
	m.log.Append(ch.seq, ch.at, ch)
	for s := range m.subs.All() {
		if d, ok := s.filter.route(ch); ok {
			m.subs.Offer(s, d)
		}
	}
}

// Run sends bookmarks and ages the history until ctx ends.
func (m *Mirror) Run(ctx context.Context) {
	t := time.NewTicker(m.opts.BookmarkInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.bookmark()
		}
	}
}

// bookmark gives every subscription that received nothing since the last
// tick the current position, so that one whose filter lets little through
// can still resume after its quiet time has left the history.
func (m *Mirror) bookmark() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log.Trim(m.now())
	m.subs.Bookmark(delivery{bookmark: m.position(m.log.Head())}, nil)
}

// MirrorStats are the mirror's figures, for metrics: as a resource's
// stream statistics, the queued bytes being those of the messages.
type MirrorStats struct {
	Subscribers, History int
	Position             string
	Dropped              uint64
	QueuedEvents         int
	QueuedBytes          int64
}

// Stats returns the mirror's figures. Safe for concurrent use.
func (m *Mirror) Stats() MirrorStats {
	m.mu.Lock()
	st := MirrorStats{Subscribers: m.subs.Len(), History: m.log.Len(), Position: m.position(m.log.Head()), Dropped: m.subs.Dropped()}
	subs := slices.Collect(m.subs.All())
	m.mu.Unlock()
	for _, s := range subs {
		n, size := s.backlog()
		st.QueuedEvents += n
		st.QueuedBytes += size
	}
	return st
}
