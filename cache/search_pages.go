package cache

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The pages of a search come from one moment, as a question's
// (ask_pages.go): the first page keeps every hit, in order, and its
// continue tokens point into them. A token carries the last hit's place
// too, so another replica, which does not keep the walk, resumes after
// that place in its own live cache.

// Bounds of the kept searches; the oldest goes first when one is reached,
// and a token into a search gone is ErrExpired (410).
const (
	maxSearchWalks    = 64
	maxSearchWalkHits = 1_000_000
	searchLifetime    = 5 * time.Minute
)

// searchToken is a search's continue token.
type searchToken struct {
	// Asked is a digest of the question (searchAsked): a token is
	// answered only for the same search by a caller who may read the same.
	Asked string       `json:"h"`
	After *searchPlace `json:"a"`
	Walk  string       `json:"w,omitempty"`
	Pos   int          `json:"p,omitempty"`
}

func askedHash(asked string) string {
	sum := sha256.Sum256([]byte(asked))
	return hex.EncodeToString(sum[:12])
}

func encodeSearchToken(t searchToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeSearchToken reads a continue token ("": the first page's) and
// refuses one made for another search.
func decodeSearchToken(token, asked string) (searchToken, error) {
	var t searchToken
	if token == "" {
		return t, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.After == nil || t.Pos < 0 {
		return searchToken{}, fmt.Errorf("%w: continue token is malformed; start the search again without it", ErrInvalid)
	}
	if t.Asked != askedHash(asked) {
		return searchToken{}, fmt.Errorf("%w: continue token belongs to another search (its text, namespace, resources, or what its caller may read); start the search again without it", ErrInvalid)
	}
	return t, nil
}

// searchWalks are a cache's kept searches.
type searchWalks struct {
	mu    sync.Mutex
	epoch string
	byID  map[uint64]*searchWalk
	order []uint64 // oldest first
	hits  int
	now   func() time.Time
}

type searchWalk struct {
	hits  []SearchHit
	asked string
	made  time.Time
}

func newSearchWalks(now func() time.Time) *searchWalks {
	b := make([]byte, 6)
	rand.Read(b)
	return &searchWalks{epoch: hex.EncodeToString(b), byID: map[uint64]*searchWalk{}, now: now}
}

// keep stores hits and returns the reference tokens carry: the epoch and
// a random number.
func (w *searchWalks) keep(hits []SearchHit, asked string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire()
	for len(w.order) > 0 && (len(w.order) >= maxSearchWalks || w.hits+len(hits) > maxSearchWalkHits) {
		w.dropOldest()
	}
	var b [8]byte
	id := uint64(0)
	for id == 0 || w.byID[id] != nil {
		rand.Read(b[:])
		id = binary.LittleEndian.Uint64(b[:])
	}
	w.byID[id] = &searchWalk{hits: hits, asked: asked, made: w.now()}
	w.order = append(w.order, id)
	w.hits += len(hits)
	return fmt.Sprintf("%s-%d", w.epoch, id)
}

// find returns the kept hits of ref; ours is false for another process's
// reference, err ErrExpired for one of ours that is gone, ErrInvalid for
// one asked otherwise.
func (w *searchWalks) find(ref, asked string) (hits []SearchHit, ours bool, err error) {
	epoch, n, _ := strings.Cut(ref, "-")
	id, perr := strconv.ParseUint(n, 10, 64)
	if epoch != w.epoch || perr != nil {
		return nil, false, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire()
	wk := w.byID[id]
	switch {
	case wk == nil:
		return nil, true, fmt.Errorf("%w: the search this token pages through is no longer kept (at most %d searches, %s each); start the search again without it",
			ErrExpired, maxSearchWalks, searchLifetime)
	case wk.asked != asked:
		return nil, true, fmt.Errorf("%w: continue token belongs to another search; start the search again without it", ErrInvalid)
	}
	return wk.hits, true, nil
}

func (w *searchWalks) expire() {
	now := w.now()
	for len(w.order) > 0 && now.Sub(w.byID[w.order[0]].made) > searchLifetime {
		w.dropOldest()
	}
}

func (w *searchWalks) dropOldest() {
	id := w.order[0]
	w.hits -= len(w.byID[id].hits)
	delete(w.byID, id)
	w.order = w.order[1:]
}
