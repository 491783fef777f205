package auth

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUserSharesKeepOneUserToItsOwnSlots(t *testing.T) {
	u := newUserShares(2, 1)
	ctx := context.Background()
	r1, err1 := u.acquire(ctx, "mallory")
	r2, err2 := u.acquire(ctx, "mallory")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// mallory's slots are full: its next waits, the one after is refused,
	// and alice, who has her own, is not held up.
	got := make(chan error, 1)
	go func() {
		r, err := u.acquire(ctx, "mallory")
		if err == nil {
			r()
		}
		got <- err
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		u.mu.Lock()
		waiting := u.users["mallory"].waiting
		u.mu.Unlock()
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the third review of mallory does not wait")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := u.acquire(ctx, "mallory"); !errors.Is(err, ErrTooManyAccessReviews) {
		t.Errorf("beyond the waiting bound: %v; expect ErrTooManyAccessReviews", err)
	}
	ra, err := u.acquire(ctx, "alice")
	if err != nil {
		t.Fatalf("alice while mallory's slots are full: %v", err)
	}
	ra()
	r1()
	if err := <-got; err != nil {
		t.Errorf("the waiting review after a slot came free: %v", err)
	}
	// A wait that outlasts its context is mallory's own doing: refused.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	r3, err := u.acquire(ctx, "mallory")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.acquire(short, "mallory"); !errors.Is(err, ErrTooManyAccessReviews) {
		t.Errorf("a wait past its context: %v; expect ErrTooManyAccessReviews", err)
	}
	r2()
	r3()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.users) != 0 {
		t.Errorf("users remembered with nothing in flight: %d", len(u.users))
	}
}
