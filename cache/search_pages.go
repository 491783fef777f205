package cache

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
type searchWalks struct{ *pageStore[*searchWalk] }

type searchWalk struct {
	hits  []SearchHit
	asked string
}

func newSearchWalks(now func() time.Time) searchWalks {
	return searchWalks{newPageStore(maxSearchWalks, maxSearchWalkHits, searchLifetime,
		func(w *searchWalk) int { return len(w.hits) }, now)}
}

// keep stores hits and returns the reference tokens carry.
func (w searchWalks) keep(hits []SearchHit, asked string) string {
	return w.add(&searchWalk{hits: hits, asked: asked})
}

// find returns the kept hits of ref; ours is false for another process's
// reference, err ErrExpired for one of ours that is gone, ErrInvalid for
// one asked otherwise.
func (w searchWalks) find(ref, asked string) (hits []SearchHit, ours bool, err error) {
	wk, ours, found := w.pageStore.find(ref)
	switch {
	case !ours:
		return nil, false, nil
	case !found:
		return nil, true, fmt.Errorf("%w: the search this token pages through is no longer kept (at most %d searches, %s each); start the search again without it",
			ErrExpired, maxSearchWalks, searchLifetime)
	case wk.asked != asked:
		return nil, true, fmt.Errorf("%w: continue token belongs to another search; start the search again without it", ErrInvalid)
	}
	return wk.hits, true, nil
}
