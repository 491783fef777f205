package cache

import (
	"bytes"
	"hash/maphash"
	"runtime"
	"sync"
	"weak"
)

// Repeated content of objects is stored once. The pods of one controller
// (a ReplicaSet's, a DaemonSet's, a Job's) carry the same containers,
// volumes and tolerations byte for byte, but for the name of their service
// account token volume (tokenParts): Build stores the value of such a
// member, or its parts around those names, as chunks, interned by content
// in chunkTable, and the object keeps its other bytes (Object.own) and
// where each chunk goes. An object's bytes are the same for every reader
// either way (object_pieces.go).
//
// The references to a chunk are counted by the collector: objects hold
// their chunks strongly, the table only weakly, and a chunk no object
// holds leaves the table when it is collected. No path on which an object
// leaves the cache (delete, update, relist, a snapshot or watch frame still
// being written) needs to release anything, a chunk can never be freed
// while a reader still has its object, and one can never leak past the
// last object that uses it.

// internMembers are the members of an object's spec whose value is
// stored as a chunk when it is at least chunkMin bytes long.
var internMembers = [...]string{"containers", "initContainers", "volumes", "tolerations", "affinity", "topologySpreadConstraints"}

// chunkMin is the shortest value stored as a chunk: below it, what an
// object saves is not much more than what a chunk's reference costs.
const chunkMin = 256

// chunk is a member's value shared by the objects that have it. Its bytes
// never change.
type chunk struct{ b []byte }

// chunkTable interns chunks by content. Safe for concurrent use.
type chunkTable struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[uint64]weak.Pointer[chunk]
	// seen are the hashes of values met once and left inline: a value
	// becomes a chunk when it is met again, so that content no other
	// object has costs nothing more than its bytes. Emptied when full.
	seen map[uint64]struct{}
}

// maxSeen bounds chunkTable.seen.
const maxSeen = 1 << 14

func newChunkTable() *chunkTable {
	return &chunkTable{seed: maphash.MakeSeed(), m: make(map[uint64]weak.Pointer[chunk]), seen: make(map[uint64]struct{})}
}

// chunks is the table every Shape's Build interns into: objects of every
// resource and cluster share it.
var chunks = newChunkTable()

// intern returns the chunk holding v, made (a copy of v) when none does
// and v was seen before; nil when v stays inline: met for the first time,
// or its hash is another live chunk's.
func (t *chunkTable) intern(v []byte) *chunk {
	h := maphash.Bytes(t.seed, v)
	t.mu.Lock()
	defer t.mu.Unlock()
	if wp, ok := t.m[h]; ok {
		if c := wp.Value(); c != nil {
			if bytes.Equal(c.b, v) {
				return c
			}
			return nil
		}
	}
	if _, ok := t.seen[h]; !ok {
		if len(t.seen) >= maxSeen {
			clear(t.seen)
		}
		t.seen[h] = struct{}{}
		return nil
	}
	delete(t.seen, h)
	c := &chunk{b: bytes.Clone(v)}
	wp := weak.Make(c)
	t.m[h] = wp
	runtime.AddCleanup(c, t.forget, chunkEntry{h, wp})
	return c
}

type chunkEntry struct {
	h  uint64
	wp weak.Pointer[chunk]
}

// forget removes a collected chunk's entry, unless a newer chunk of the
// same hash took its place meanwhile.
func (t *chunkTable) forget(e chunkEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[e.h] == e.wp {
		delete(t.m, e.h)
	}
}

// len returns the number of chunks in the table (collected ones whose
// cleanup has not run yet included).
func (t *chunkTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// holds reports whether the table has a live chunk of v.
func (t *chunkTable) holds(v []byte) bool {
	h := maphash.Bytes(t.seed, v)
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.m[h].Value()
	return c != nil && bytes.Equal(c.b, v)
}
