package ipowner

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The address history persists in a bbolt file when HistoryOptions.Dir
// is set: every interval under its id, and a little metadata. Changes are
// marked under the history's lock (a map insert) and written once a
// second by the history's own goroutine, in one transaction: the informer
// path never waits for the disk.
var (
	bucketIntervals = []byte("intervals")
	bucketMeta      = []byte("meta")
	keyStarted      = []byte("started")   // unix ns: when the history began
	keyLastWrite    = []byte("lastWrite") // unix ns: the last flush
	keyNextID       = []byte("nextID")
	keyGaps         = []byte("gaps") // JSON [[from,to],…]: moments nobody observed
)

// flushEvery is how often changes reach the disk.
const flushEvery = time.Second

type storedInterval struct {
	IP          string `json:"ip"`
	Kind        string `json:"k"`
	Namespace   string `json:"ns,omitempty"`
	Name        string `json:"n"`
	UID         string `json:"u"`
	HostNetwork bool   `json:"h,omitempty"`
	Role        Role   `json:"r"`
	From        int64  `json:"f"`
	To          int64  `json:"t,omitempty"`
	Since       string `json:"s,omitempty"`
	Ports       []Port `json:"p,omitempty"`
	// PortsBefore are the ports declared before Ports, oldest first, when
	// they changed while the owner held the address (absent in files of
	// versions that kept only the latest ports: those load as one span).
	PortsBefore []storedPorts `json:"pb,omitempty"`
}

type storedPorts struct {
	Until int64  `json:"u"`
	Ports []Port `json:"p,omitempty"`
}

func idKey(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

func readInt(b *bolt.Bucket, key []byte) int64 {
	v := b.Get(key)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func putInt(b *bolt.Bucket, key []byte, v int64) error {
	return b.Put(key, binary.BigEndian.AppendUint64(nil, uint64(v)))
}

// openStore opens (or creates) the history file in dir and loads what it
// holds into x. The time since the last write is a gap: nobody observed
// it, and moments in it are refused.
func (x *History) openStore(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--ip-history-dir: %w", err)
	}
	path := filepath.Join(dir, "ip-history.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("--ip-history-dir: opening %s: %w", path, err)
	}
	now := x.now().UnixNano()
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		ivs, err := tx.CreateBucketIfNotExists(bucketIntervals)
		if err != nil {
			return err
		}
		if started := readInt(meta, keyStarted); started != 0 {
			x.started = started
		} else if err := putInt(meta, keyStarted, x.started); err != nil {
			return err
		}
		x.nextID = uint64(readInt(meta, keyNextID))
		if g := meta.Get(keyGaps); g != nil {
			if err := json.Unmarshal(g, &x.gaps); err != nil {
				return fmt.Errorf("gaps: %w", err)
			}
		}
		if last := readInt(meta, keyLastWrite); last != 0 && last < now {
			x.gaps = append(x.gaps, [2]int64{last, now})
		}
		return ivs.ForEach(func(k, v []byte) error {
			var s storedInterval
			if err := json.Unmarshal(v, &s); err != nil || len(k) != 8 {
				return fmt.Errorf("interval %x: %v", k, err)
			}
			if _, ok := nameIndex(roleNames[:], s.Role); !ok {
				return fmt.Errorf("interval %x: unknown role %q", k, s.Role)
			}
			if _, ok := nameIndex(sinceNames[:], s.Since); !ok {
				return fmt.Errorf("interval %x: unknown beginning %q", k, s.Since)
			}
			x.restore(binary.BigEndian.Uint64(k), s)
			return nil
		})
	})
	if err != nil {
		db.Close()
		return fmt.Errorf("--ip-history-dir: reading %s: %w", path, err)
	}
	slices.SortStableFunc(x.closed, func(a, b *interval) int { return compareInt(a.to, b.to) })
	for _, line := range x.byIP {
		slices.SortStableFunc(line, func(a, b *interval) int { return compareInt(a.from, b.from) })
	}
	x.db, x.pending, x.unseen = db, map[*interval]bool{}, map[string]bool{}
	for uid := range x.open {
		x.unseen[uid] = true
	}
	return nil
}

// restore puts one stored interval back. Owners are shared by UID.
func (x *History) restore(id uint64, s storedInterval) {
	who := x.restoredOwner(s)
	role, _ := nameIndex(roleNames[:], s.Role) // checked when read
	since, _ := nameIndex(sinceNames[:], s.Since)
	iv := &interval{id: id, ip: s.IP, who: who, role: role, from: s.From, to: s.To, since: since, ports: portsOf(s.Ports)}
	for _, b := range s.PortsBefore {
		x.portsBefore[iv] = append(x.portsBefore[iv], portSpan{until: b.Until, ports: b.Ports})
	}
	x.byIP[s.IP] = append(x.byIP[s.IP], iv)
	x.count++
	x.nextID = max(x.nextID, id+1)
	if iv.to != 0 {
		x.closed = append(x.closed, iv)
		return
	}
	k := Held{IP: s.IP, Role: s.Role}
	claims := x.open[s.UID]
	if i := claimIndex(claims, k); i >= 0 {
		claims[i].iv = iv // the file holds one open interval per claim; keep the last
		return
	}
	x.open[s.UID] = append(claims, claim{ip: s.IP, iv: iv, role: role})
}

func (x *History) restoredOwner(s storedInterval) *who {
	for _, c := range x.open[s.UID] {
		if c.iv != nil {
			return c.iv.who
		}
	}
	kind, _ := kindNamed(s.Kind) // an unknown kind (a file of a later version) is kept, unnamed
	return &who{kind: kind, namespace: s.Namespace, name: s.Name, uid: s.UID, hostNetwork: s.HostNetwork}
}

// Reconcile ends, once every informer has listed, the restored intervals
// of owners the lists no longer hold: they released their addresses while
// nobody was watching, at the latest now.
func (x *History) Reconcile() {
	now := x.now().UnixNano()
	x.mu.Lock()
	defer x.mu.Unlock()
	for uid := range x.unseen {
		for _, c := range x.open[uid] {
			if c.iv != nil {
				x.closeLocked(c.iv, now)
			}
		}
		delete(x.open, uid)
	}
	x.unseen = nil
}

// dirtyLocked marks an interval to be written (or deleted) with the next
// flush. x.mu must be held.
func (x *History) dirtyLocked(iv *interval, deleted bool) {
	if x.pending != nil {
		x.pending[iv] = deleted
	}
}

// Persistent reports whether the history is kept in a file (Run must
// then run).
func (x *History) Persistent() bool { return x.db != nil }

// Run flushes the changes every flushEvery until ctx ends, then flushes
// the last and closes the file. Without a file it returns at once.
func (x *History) Run(ctx context.Context) {
	if x.db == nil {
		return
	}
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			x.flush()
			x.db.Close()
			return
		case <-tick.C:
			x.flush()
		}
	}
}

// flush writes what changed since the last flush in one transaction.
// Records are encoded under the lock (intervals change under it), the
// disk is written after it is released.
func (x *History) flush() error {
	type change struct {
		key []byte
		val []byte // nil: delete
	}
	x.mu.Lock()
	changes := make([]change, 0, len(x.pending))
	for iv, deleted := range x.pending {
		c := change{key: idKey(iv.id)}
		if !deleted {
			s := storedInterval{IP: iv.ip, Kind: iv.who.kind.String(), Namespace: iv.who.namespace, Name: iv.who.name,
				UID: iv.who.uid, HostNetwork: iv.who.hostNetwork, Role: iv.Role(), From: iv.from, To: iv.to, Since: iv.Since(), Ports: iv.Ports()}
			for _, b := range x.portsBefore[iv] {
				s.PortsBefore = append(s.PortsBefore, storedPorts{Until: b.until, Ports: b.ports})
			}
			c.val, _ = json.Marshal(s)
		}
		changes = append(changes, c)
	}
	clear(x.pending)
	nextID, gaps := x.nextID, slices.Clone(x.gaps)
	x.mu.Unlock()
	now := x.now().UnixNano()
	err := x.db.Update(func(tx *bolt.Tx) error {
		ivs, meta := tx.Bucket(bucketIntervals), tx.Bucket(bucketMeta)
		for _, c := range changes {
			var err error
			if c.val == nil {
				err = ivs.Delete(c.key)
			} else {
				err = ivs.Put(c.key, c.val)
			}
			if err != nil {
				return err
			}
		}
		g, _ := json.Marshal(gaps)
		if err := meta.Put(keyGaps, g); err != nil {
			return err
		}
		if err := putInt(meta, keyNextID, int64(nextID)); err != nil {
			return err
		}
		return putInt(meta, keyLastWrite, now)
	})
	if err != nil {
		x.writeErrors.Add(1)
	}
	return err
}
