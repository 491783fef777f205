package cache

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
	"github.com/kubeindex/kubeindex/ipowner"
)

// AddressStream is the name of the address-ownership stream (the mirror
// for agents) where a resource name would stand: in a multiplexed
// socket's subscribe message and in the stream statistics. No resource can
// be called so: resource names hold no colon.
const AddressStream = "ip:watch"

// AddressOwner is one object that holds an address now, as the mirror
// streams it: a Pod (podIP, active pods only, as the IP lookup counts
// them), a Service (clusterIP, externalIP, loadBalancer) or a Node
// (nodeInternal, nodeExternal). NodeName is a pod's node.
type AddressOwner struct {
	Kind        string       `json:"kind"`
	Namespace   string       `json:"namespace,omitempty"`
	Name        string       `json:"name"`
	UID         string       `json:"uid"`
	Role        ipowner.Role `json:"role"`
	HostNetwork bool         `json:"hostNetwork,omitempty"`
	NodeName    string       `json:"nodeName,omitempty"`
}

// addrEvent is one change of an address's owner set, as the mirror
// published it. Its message with every owner is encoded once, lazily, and
// shared by the subscribers that see every owner.
type addrEvent struct {
	seq      uint64
	ip       string
	old, cur []AddressOwner
	at       time.Time
	all      lazyBytes
}

// addrMirror keeps who holds each address now, fed by the same one
// informer handler per shard as the brokers and the history, and streams
// it: a snapshot of the owned addresses, then each change of an address's
// owner set, in the order the mirror saw them, numbered by its own
// sequence. The events of pods, Services and nodes come from different
// informers; the sequence is the one order they are applied in, so a
// snapshot and the events after its position have neither gap nor
// overlap.
//
// Positions are "<epoch>-<seq>": the epoch is drawn at start-up, so a
// position from another replica or an earlier run is never taken for one
// of ours. Everything happens under mu, and nothing done under it blocks:
// a subscriber whose queue is full is ended.
type addrMirror struct {
	now   func() time.Time
	opts  StreamOptions
	epoch string

	mu     sync.Mutex
	owners map[string][]AddressOwner // ip → owners, ordered (sortOwners)
	holds  map[string][]ipowner.Held // uid → what it holds
	// log is the history for resuming; its positions are the sequence
	// (the head is the last event's).
	log  *replay.Log[*addrEvent]
	subs replay.Fanout[*addrSub, addrDelivery]
}

func newAddrMirror(now func() time.Time, opts StreamOptions) *addrMirror {
	var b [6]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	opts = opts.withDefaults()
	return &addrMirror{now: now, opts: opts, epoch: hex.EncodeToString(b[:]),
		owners: map[string][]AddressOwner{}, holds: map[string][]ipowner.Held{},
		log: replay.NewLog[*addrEvent](opts.HistorySize, opts.HistoryAge)}
}

func (m *addrMirror) position(seq uint64) string {
	return m.epoch + "-" + strconv.FormatUint(seq, 10)
}

// parsePosition reads a position this server may have sent. ours is false
// for a well-formed position of another epoch.
func (m *addrMirror) parsePosition(p string) (seq uint64, ours bool, err error) {
	epoch, n, ok := strings.Cut(p, "-")
	seq, perr := strconv.ParseUint(n, 10, 64)
	if !ok || perr != nil || len(epoch) != len(m.epoch) || strings.Trim(epoch, "0123456789abcdef") != "" {
		return 0, false, fmt.Errorf("%w: resourceVersion %q is not a position of the address stream (they look like %q)",
			ErrInvalid, p, m.position(42))
	}
	return seq, epoch == m.epoch, nil
}

var kindOrder = map[string]int{"Pod": 0, "Service": 1, "Node": 2}

// sortOwners orders an address's owners as IP answers list them: pods,
// then Services, then nodes; each by namespace/name, then role.
func sortOwners(owners []AddressOwner) {
	slices.SortFunc(owners, func(a, b AddressOwner) int {
		if c := kindOrder[a.Kind] - kindOrder[b.Kind]; c != 0 {
			return c
		}
		for _, c := range []int{strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name),
			strings.Compare(string(a.Role), string(b.Role)), strings.Compare(a.UID, b.UID)} {
			if c != 0 {
				return c
			}
		}
		return 0
	})
}

// observe records that the object h describes now holds h.held (nothing,
// when deleted), and publishes each address whose owner set changed.
func (m *addrMirror) observe(h ipowner.Holding) {
	uid := h.Owner.UID
	owner := AddressOwner{Kind: h.Owner.Kind.String(), Namespace: h.Owner.Namespace, Name: h.Owner.Name, UID: uid,
		HostNetwork: h.Owner.HostNetwork, NodeName: h.Owner.NodeName}
	var held []ipowner.Held
	for _, e := range h.Held {
		if !slices.Contains(held, e) {
			held = append(held, e)
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
		cur := make([]AddressOwner, 0, len(old)+1)
		for _, o := range old {
			if o.UID != uid {
				cur = append(cur, o)
			}
		}
		for _, e := range held {
			if e.IP == ip {
				o := owner
				o.Role = e.Role
				cur = append(cur, o)
			}
		}
		sortOwners(cur)
		if slices.Equal(old, cur) {
			continue
		}
		if len(cur) == 0 {
			cur = nil
			delete(m.owners, ip)
		} else {
			m.owners[ip] = cur
		}
		m.publishLocked(&addrEvent{ip: ip, old: old, cur: cur, at: now})
	}
	if len(held) == 0 {
		delete(m.holds, uid)
	} else {
		m.holds[uid] = held
	}
}

// publishLocked numbers ev, keeps it in the history and offers it to
// every subscriber that sees a change in it.
func (m *addrMirror) publishLocked(ev *addrEvent) {
	ev.seq = m.log.Head() + 1
	m.log.Append(ev.seq, ev.at, ev)
	for s := range m.subs.All() {
		if d, ok := s.filter.route(ev); ok {
			m.subs.Offer(s, d)
		}
	}
}

// run sends bookmarks and ages the history until ctx ends.
func (m *addrMirror) run(ctx context.Context) {
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
func (m *addrMirror) bookmark() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log.Trim(m.now())
	m.subs.Bookmark(addrDelivery{bookmark: m.position(m.log.Head())}, nil)
}

func (m *addrMirror) stats() StreamStats {
	m.mu.Lock()
	st := StreamStats{Resource: AddressStream, Subscribers: m.subs.Len(), History: m.log.Len(),
		ResourceVersion: m.position(m.log.Head()), Dropped: m.subs.Dropped()}
	subs := slices.Collect(m.subs.All())
	m.mu.Unlock()
	for _, s := range subs {
		n, size := s.backlog()
		st.QueuedEvents += n
		st.QueuedBytes += size
	}
	return st
}
