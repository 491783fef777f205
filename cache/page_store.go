package cache

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pageStore holds answers that continue tokens page through (a question's
// walks, a search's hits): at most max of them, at most maxSize in all as
// sizeOf counts them, none older than life; the oldest goes first when a
// bound is reached. A reference is the process's epoch, so another
// replica's token is told apart, and a random number, not a count, so
// that one caller's reference tells nothing of another's.
type pageStore[T any] struct {
	mu      sync.Mutex
	epoch   string
	byID    map[uint64]pageEntry[T]
	order   []uint64 // oldest first
	size    int
	max     int
	maxSize int
	life    time.Duration
	sizeOf  func(T) int
	now     func() time.Time
}

type pageEntry[T any] struct {
	v    T
	size int
	made time.Time
}

func newPageStore[T any](max, maxSize int, life time.Duration, sizeOf func(T) int, now func() time.Time) *pageStore[T] {
	b := make([]byte, 6)
	rand.Read(b)
	return &pageStore[T]{epoch: hex.EncodeToString(b), byID: map[uint64]pageEntry[T]{},
		max: max, maxSize: maxSize, life: life, sizeOf: sizeOf, now: now}
}

// add keeps v and returns its reference.
func (k *pageStore[T]) add(v T) string {
	size := k.sizeOf(v)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expire()
	for len(k.order) > 0 && (len(k.order) >= k.max || k.size+size > k.maxSize) {
		k.dropOldest()
	}
	var b [8]byte
	id := uint64(0)
	for taken := true; id == 0 || taken; _, taken = k.byID[id] {
		rand.Read(b[:])
		id = binary.LittleEndian.Uint64(b[:])
	}
	k.byID[id] = pageEntry[T]{v: v, size: size, made: k.now()}
	k.order = append(k.order, id)
	k.size += size
	return fmt.Sprintf("%s-%d", k.epoch, id)
}

// find returns what ref refers to; ours is false for another process's
// reference (the caller resumes from its live cache), found is false for
// one of ours no longer kept.
func (k *pageStore[T]) find(ref string) (v T, ours, found bool) {
	epoch, n, _ := strings.Cut(ref, "-")
	id, err := strconv.ParseUint(n, 10, 64)
	if epoch != k.epoch || err != nil {
		return v, false, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expire()
	e, found := k.byID[id]
	return e.v, true, found
}

func (k *pageStore[T]) expire() {
	now := k.now()
	for len(k.order) > 0 && now.Sub(k.byID[k.order[0]].made) > k.life {
		k.dropOldest()
	}
}

func (k *pageStore[T]) dropOldest() {
	id := k.order[0]
	k.size -= k.byID[id].size
	delete(k.byID, id)
	k.order = k.order[1:]
}
