package cache

import (
	"errors"
	"testing"
	"time"
)

// TestWalksAreBounded: a walk is kept for walkLifetime and among the
// maxWalks newest; after, its token is ErrExpired; another process's
// token is not ours to expire.
func TestWalksAreBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	w := newWalks(func() time.Time { return now })
	first := w.keep("pods", "name", "", make([]row, 3))
	if wk, ours, err := w.find(first); wk == nil || !ours || err != nil {
		t.Fatalf("a kept walk: %v %v %v", wk, ours, err)
	}
	now = now.Add(walkLifetime + time.Second)
	if _, ours, err := w.find(first); !ours || !errors.Is(err, ErrExpired) {
		t.Fatalf("an old walk: %v %v; expect ErrExpired", ours, err)
	}
	refs := []string{}
	for range maxWalks + 1 {
		refs = append(refs, w.keep("pods", "name", "", make([]row, 1)))
	}
	if _, _, err := w.find(refs[0]); !errors.Is(err, ErrExpired) {
		t.Errorf("the oldest of maxWalks+1: %v; expect ErrExpired", err)
	}
	if wk, _, err := w.find(refs[len(refs)-1]); wk == nil || err != nil {
		t.Errorf("the newest: %v", err)
	}
	big := w.keep("pods", "name", "", make([]row, maxWalkRows))
	if w.size != maxWalkRows || len(w.order) != 1 {
		t.Errorf("rows %d in %d walks; expect the big one alone", w.size, len(w.order))
	}
	if _, _, err := w.find(big); err != nil {
		t.Error(err)
	}
	for _, foreign := range []string{"0123456789ab-1", "x", "", w.epoch + "-x"} {
		if wk, ours, err := w.find(foreign); wk != nil || err != nil || ours && foreign != w.epoch+"-x" {
			t.Errorf("%q: %v %v %v", foreign, wk, ours, err)
		}
	}
}
