package auth

import (
	"context"
	"errors"
	"sync"
)

// ErrTooManyAccessReviews is the answer to a user who has more access
// reviews waiting than its share allows: the question was not asked, and
// the caller should be told to slow down, not that it is refused.
var ErrTooManyAccessReviews = errors.New("too many access reviews waiting for this user")

// userShares gives each user a fair share of the reviews in flight: at
// most perUser of one user's reviews are asked at once, the others wait
// for a slot of their own user (never of someone else), and at most
// maxWaiting wait; beyond, ErrTooManyAccessReviews. The review client
// serves its requests in turn, so another user's review waits behind at
// most perUser of a flooding user's, however many that user asks for.
// Safe for concurrent use.
type userShares struct {
	perUser, maxWaiting int

	mu    sync.Mutex
	users map[string]*userShare
}

type userShare struct {
	slots   chan struct{}
	waiting int // blocked on slots
	refs    int // holding or waiting for a slot
}

func newUserShares(perUser, maxWaiting int) *userShares {
	return &userShares{perUser: perUser, maxWaiting: maxWaiting, users: map[string]*userShare{}}
}

// acquire takes a slot of user's share, waiting while ctx allows; release
// gives it back.
func (u *userShares) acquire(ctx context.Context, user string) (release func(), err error) {
	u.mu.Lock()
	sh := u.users[user]
	if sh == nil {
		sh = &userShare{slots: make(chan struct{}, u.perUser)}
		u.users[user] = sh
	}
	select {
	case sh.slots <- struct{}{}:
		sh.refs++
		u.mu.Unlock()
		return func() { u.release(user, sh, true) }, nil
	default:
	}
	if sh.waiting >= u.maxWaiting {
		u.mu.Unlock()
		return nil, ErrTooManyAccessReviews
	}
	sh.waiting++
	sh.refs++
	u.mu.Unlock()
	select {
	case sh.slots <- struct{}{}:
		u.mu.Lock()
		sh.waiting--
		u.mu.Unlock()
		return func() { u.release(user, sh, true) }, nil
	case <-ctx.Done():
		u.mu.Lock()
		sh.waiting--
		u.mu.Unlock()
		u.release(user, sh, false)
		return nil, ErrTooManyAccessReviews // the user's own reviews kept it waiting
	}
}

func (u *userShares) release(user string, sh *userShare, held bool) {
	if held {
		<-sh.slots
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if sh.refs--; sh.refs == 0 {
		delete(u.users, user)
	}
}
