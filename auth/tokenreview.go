package auth

import (
	"context"
	"fmt"
	"slices"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
)

// TokenReviewOptions configures TokenReviewer.
type TokenReviewOptions struct {
	// Audiences the token must be meant for. Empty: the API server's own
	// (any token the API server itself accepts).
	Audiences []string
	// Cache defaults: valid tokens DefaultTokenAllowTTL, invalid ones 2s, 4096 valid
	// tokens and, apart, 1024 invalid ones, a stale grace of 5 minutes.
	Cache CacheOptions
	// ReviewsPerSecond and ReviewBurst bound the reviews one client
	// address may cause: each token the cache does not know costs one.
	// Defaults DefaultReviewsPerSecond and ReviewBurstSeconds times it:
	// ~50 users behind one address, each reviewed once per AllowTTL.
	// Beyond, AuthenticateToken fails with ErrTooManyReviews without
	// asking the API server.
	ReviewsPerSecond float64
	ReviewBurst      int
	// ClientAddresses is how many addresses' budgets are remembered.
	// Default 16384.
	ClientAddresses int
	// KnownFor is how long a token the API server called valid stays
	// known: its answer expired, it is reviewed again without taking from
	// its address's budget, so that strangers flooding from a shared
	// address (a NAT, an ingress) cannot lock out the users behind it.
	// Remembered for as many tokens as Cache.MaxEntries. Default
	// DefaultKnownFor.
	KnownFor time.Duration
}

// DefaultKnownFor is TokenReviewOptions.KnownFor's default.
const DefaultKnownFor = time.Hour

// DefaultReviewsPerSecond is TokenReviewOptions.ReviewsPerSecond's
// default; ReviewBurstSeconds makes the default burst from the rate.
const (
	DefaultReviewsPerSecond = 5
	ReviewBurstSeconds      = 4
)

// DefaultTokenAllowTTL is how long a valid token's review is kept by
// default: a revoked token is believed that long.
const DefaultTokenAllowTTL = 10 * time.Second

// DefaultReviewBurst is ReviewBurst's default for a rate of reviews a
// second: ReviewBurstSeconds' worth, at least one.
func DefaultReviewBurst(perSecond float64) int { return max(1, int(ReviewBurstSeconds*perSecond)) }

// TokenReviewer authenticates bearer tokens with the Kubernetes TokenReview
// API: the API server says whose token it is, so every credential the
// cluster accepts (service account tokens, OIDC, webhook…) works here.
// kubeindex's service account needs the ClusterRole system:auth-delegator.
type TokenReviewer struct {
	client    authnclient.TokenReviewInterface
	audiences []string
	cache     *decisionCache[review]
	limits    *addrLimiter
	// known holds the hashes of the tokens found valid within knownFor:
	// their reviews are not charged to an address.
	known    *utilcache.LRUExpireCache
	knownFor time.Duration
}

type review struct {
	user *User // nil: not authenticated
}

// NewTokenReviewer builds a TokenReviewer on a client of the API server.
func NewTokenReviewer(client authnclient.TokenReviewInterface, o TokenReviewOptions) *TokenReviewer {
	co := o.Cache.withDefaults(DefaultTokenAllowTTL, 2*time.Second, 4096, 5*time.Minute)
	if o.ReviewsPerSecond <= 0 {
		o.ReviewsPerSecond = DefaultReviewsPerSecond
	}
	if o.ReviewBurst <= 0 {
		o.ReviewBurst = DefaultReviewBurst(o.ReviewsPerSecond)
	}
	if o.ClientAddresses <= 0 {
		o.ClientAddresses = 16384
	}
	if o.KnownFor <= 0 {
		o.KnownFor = DefaultKnownFor
	}
	return &TokenReviewer{client: client, audiences: o.Audiences,
		cache:  newDecisionCache(co, func(r review) bool { return r.user != nil }),
		limits: newAddrLimiter(o.ReviewsPerSecond, o.ReviewBurst, o.ClientAddresses, co.Now),
		known:  utilcache.NewLRUExpireCacheWithClock(co.MaxEntries, clock(co.Now)), knownFor: o.KnownFor}
}

// NewTokenReviewerForConfig builds a TokenReviewer that uses the same
// cluster access as the cache.
func NewTokenReviewerForConfig(cfg *rest.Config, o TokenReviewOptions) (*TokenReviewer, error) {
	c, err := authnclient.NewForConfig(reviewConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("TokenReview client: %w", err)
	}
	return NewTokenReviewer(c.TokenReviews(), o), nil
}

// reviewConfig gives review clients their own rate limit: the default
// (5/s) would throttle a burst of new callers long before the API server
// would.
func reviewConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 100, 200
	return c
}

// AuthenticateToken implements Authenticator. A cached answer costs
// nothing. A token the API server called valid within KnownFor is
// reviewed again when its answer expires, without taking from any
// address's budget: it is one of a bounded number of known callers', each
// reviewed at most once per answer's lifetime. Any other token (a
// stranger's) costs a review from the budget of the client's address
// (WithClientAddr), or ErrTooManyReviews beyond it.
func (t *TokenReviewer) AuthenticateToken(ctx context.Context, token string) (*User, bool, error) {
	if token == "" {
		return nil, false, nil
	}
	addr := ClientAddr(ctx)
	key := cacheKey(token)
	r, err := t.cache.get(ctx, key, func(ctx context.Context) (review, error) {
		if _, known := t.known.Get(key); !known && !t.limits.allow(addr) {
			return review{}, ErrTooManyReviews
		}
		r, err := t.review(ctx, token)
		switch {
		case err != nil:
		case r.user != nil:
			t.known.Add(key, struct{}{}, t.knownFor)
		default:
			t.known.Remove(key) // revoked: a stranger's from now on
		}
		return r, err
	})
	if err != nil {
		return nil, false, err
	}
	return r.user, r.user != nil, nil
}

func (t *TokenReviewer) review(ctx context.Context, token string) (review, error) {
	tr, err := t.client.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: t.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return review{}, fmt.Errorf("%w: TokenReview: %v", ErrUnavailable, err)
	}
	st := tr.Status
	if !st.Authenticated {
		return review{}, nil
	}
	if len(t.audiences) > 0 && !slices.ContainsFunc(st.Audiences, func(a string) bool { return slices.Contains(t.audiences, a) }) {
		return review{}, nil // valid, but meant for someone else
	}
	u := &User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups}
	if len(st.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			u.Extra[k] = []string(v)
		}
	}
	return review{user: u}, nil
}

// Stats implements StatsReporter.
func (t *TokenReviewer) Stats() Stats { return t.cache.stats() }
