package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/auth/authtest"
)

var (
	alice = auth.User{Name: "alice", UID: "u-alice", Groups: []string{"devs"}}
	bob   = auth.User{Name: "bob", UID: "u-bob"}
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func TestStaticTokens(t *testing.T) {
	st, err := auth.ParseStaticTokens([]byte("# comment\n" +
		"s3cret,alice,u-alice,\"devs,ops\"\n" +
		"other-token,bob,u-bob\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token  string
		user   string
		groups string
	}{
		{"s3cret", "alice", "devs,ops,system:authenticated"},
		{"other-token", "bob", "system:authenticated"},
		{"s3cre", "", ""},
		{"s3cret ", "", ""},
		{"", "", ""},
		{"S3CRET", "", ""},
	}
	for _, tt := range tests {
		u, ok, err := st.AuthenticateToken(context.Background(), tt.token)
		if err != nil {
			t.Fatal(err)
		}
		if ok != (tt.user != "") || ok && (u.Name != tt.user || strings.Join(u.Groups, ",") != tt.groups) {
			t.Errorf("token %q: %v %+v; expect user %q groups %q", tt.token, ok, u, tt.user, tt.groups)
		}
	}
	if s := st.Stats(); s.Allowed != 2 || s.Denied != 4 {
		t.Errorf("stats %+v", s)
	}
}

func TestStaticTokensErrorsNameTheLineNotTheToken(t *testing.T) {
	tests := []struct{ file, want string }{
		{"", "no tokens"},
		{"# only a comment\n", "no tokens"},
		{"SECRETX,alice\n", "line 1: want token,user,uid"},
		{"a,b,c\nSECRETX,,uid\n", "line 2: empty user name"},
		{",alice,uid\n", "line 1: empty token"},
		{"SECRETX,alice,1\nSECRETX,bob,2\n", "line 2: the same token as line 1"},
		{"SECRET X,alice,1\n", "line 1: the token contains white space"},
		{"SECRETX,alice,1,\"g\n", "line 1:"},
		{"SECRETX,alice,1,g,extra\n", "line 1: want"},
	}
	for _, tt := range tests {
		_, err := auth.ParseStaticTokens([]byte(tt.file))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v; expect %q", tt.file, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%q: the error quotes the token: %v", tt.file, err)
		}
	}
}

func TestTokenReviewCachesBothWays(t *testing.T) {
	api := authtest.New(t, map[string]auth.User{"alice-token": alice})
	clock := newClock()
	tr, err := auth.NewTokenReviewerForConfig(api.Config(), auth.TokenReviewOptions{Cache: auth.CacheOptions{Now: clock.now}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 5 {
		u, ok, err := tr.AuthenticateToken(ctx, "alice-token")
		if err != nil || !ok || u.Name != "alice" || u.UID != "u-alice" || !strings.Contains(strings.Join(u.Groups, ","), "devs") {
			t.Fatalf("alice: %+v %v %v", u, ok, err)
		}
		if _, ok, err := tr.AuthenticateToken(ctx, "bad"); ok || err != nil {
			t.Fatalf("bad token: %v %v", ok, err)
		}
	}
	if n, _ := api.Reviews(); n != 2 {
		t.Errorf("%d TokenReviews for 10 checks of 2 tokens; expect 2 (cached)", n)
	}
	// The negative answer expires first (2s), the positive one after 10s.
	clock.add(3 * time.Second)
	tr.AuthenticateToken(ctx, "alice-token")
	tr.AuthenticateToken(ctx, "bad")
	if n, _ := api.Reviews(); n != 3 {
		t.Errorf("%d TokenReviews after 3s; expect 3 (bad token asked again)", n)
	}
	clock.add(8 * time.Second)
	tr.AuthenticateToken(ctx, "alice-token")
	if n, _ := api.Reviews(); n != 4 {
		t.Errorf("%d TokenReviews after 11s; expect 4 (alice asked again)", n)
	}
	if s := tr.Stats(); s.CacheHits != 9 || s.CacheMisses != 4 || s.Allowed != 7 || s.Denied != 6 {
		t.Errorf("stats %+v", s)
	}
}

func TestTokenReviewOutage(t *testing.T) {
	api := authtest.New(t, map[string]auth.User{"alice-token": alice})
	clock := newClock()
	tr, _ := auth.NewTokenReviewerForConfig(api.Config(), auth.TokenReviewOptions{Cache: auth.CacheOptions{Now: clock.now}})
	ctx := context.Background()
	if _, ok, _ := tr.AuthenticateToken(ctx, "alice-token"); !ok {
		t.Fatal("alice refused")
	}
	api.SetDown(true)
	clock.add(time.Minute) // expired, within the stale grace
	if _, ok, err := tr.AuthenticateToken(ctx, "alice-token"); !ok || err != nil {
		t.Errorf("during an outage, a recently valid token: %v %v; expect the stale answer", ok, err)
	}
	if _, _, err := tr.AuthenticateToken(ctx, "never-seen"); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("during an outage, an unknown token: %v; expect ErrUnavailable", err)
	}
	clock.add(10 * time.Minute) // beyond the grace
	if _, _, err := tr.AuthenticateToken(ctx, "alice-token"); err == nil {
		t.Error("beyond the stale grace, the outage must show")
	}
	if s := tr.Stats(); s.StaleHits != 1 || s.Errors != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestTokenReviewAudiences(t *testing.T) {
	api := authtest.New(t, map[string]auth.User{"alice-token": alice})
	tr, _ := auth.NewTokenReviewerForConfig(api.Config(), auth.TokenReviewOptions{Audiences: []string{"kubeindex"}})
	// The fake API server returns no audiences: the token is not for us.
	if _, ok, err := tr.AuthenticateToken(context.Background(), "alice-token"); ok || err != nil {
		t.Errorf("token without our audience: %v %v; expect refused", ok, err)
	}
}

func TestConcurrentReviewsAreAskedOnce(t *testing.T) {
	api := authtest.New(t, map[string]auth.User{"alice-token": alice},
		authtest.Rule{User: "alice", Verbs: []string{"list"}, Resource: "pods", Namespace: "a"})
	tr, _ := auth.NewTokenReviewerForConfig(api.Config(), auth.TokenReviewOptions{})
	ar, _ := auth.NewAccessReviewerForConfig(api.Config(), auth.AccessReviewOptions{})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			u, ok, err := tr.AuthenticateToken(context.Background(), "alice-token")
			if !ok || err != nil {
				t.Error("alice refused", err)
				return
			}
			if ok, _, err := ar.Authorize(context.Background(), auth.Attributes{User: u, Verb: "list", Resource: "pods", Namespace: "a"}); !ok || err != nil {
				t.Error("alice may list pods in a", err)
			}
		})
	}
	wg.Wait()
	if tn, an := api.Reviews(); tn != 1 || an != 1 {
		t.Errorf("50 concurrent callers: %d TokenReviews, %d SubjectAccessReviews; expect 1 and 1", tn, an)
	}
}

func TestAccessReview(t *testing.T) {
	api := authtest.New(t, nil,
		authtest.Rule{User: "alice", Verbs: []string{"get", "list", "watch"}, Resource: "pods", Namespace: "a"},
		authtest.Rule{Group: "viewers", Verbs: []string{"list"}, APIGroup: "apps", Resource: "deployments"},
		authtest.Rule{User: "bob", Verbs: []string{"get"}, Path: "/metrics"})
	clock := newClock()
	ar, _ := auth.NewAccessReviewerForConfig(api.Config(), auth.AccessReviewOptions{Cache: auth.CacheOptions{Now: clock.now}})
	viewer := &auth.User{Name: "carol", Groups: []string{"viewers"}}
	tests := []struct {
		name  string
		at    auth.Attributes
		allow bool
	}{
		{"alice lists pods in a", auth.Attributes{User: &alice, Verb: "list", Resource: "pods", Namespace: "a"}, true},
		{"alice watches pods in a", auth.Attributes{User: &alice, Verb: "watch", Resource: "pods", Namespace: "a"}, true},
		{"alice gets a pod in a", auth.Attributes{User: &alice, Verb: "get", Resource: "pods", Namespace: "a", Name: "p"}, true},
		{"alice lists pods in b", auth.Attributes{User: &alice, Verb: "list", Resource: "pods", Namespace: "b"}, false},
		{"alice lists pods everywhere", auth.Attributes{User: &alice, Verb: "list", Resource: "pods"}, false},
		{"alice lists deployments in a", auth.Attributes{User: &alice, Verb: "list", Group: "apps", Resource: "deployments", Namespace: "a"}, false},
		{"a viewer lists deployments everywhere", auth.Attributes{User: viewer, Verb: "list", Group: "apps", Resource: "deployments"}, true},
		{"a viewer lists deployments of the core group", auth.Attributes{User: viewer, Verb: "list", Resource: "deployments"}, false},
		{"bob reads /metrics", auth.Attributes{User: &bob, Verb: "get", Path: "/metrics"}, true},
		{"alice reads /metrics", auth.Attributes{User: &alice, Verb: "get", Path: "/metrics"}, false},
		{"no user", auth.Attributes{Verb: "get", Path: "/metrics"}, false},
	}
	for range 2 { // the second round is answered from the cache
		for _, tt := range tests {
			ok, _, err := ar.Authorize(context.Background(), tt.at)
			if err != nil || ok != tt.allow {
				t.Errorf("%s: %v %v; expect %v", tt.name, ok, err, tt.allow)
			}
		}
	}
	if _, n := api.Reviews(); n != int64(len(tests)-1) {
		t.Errorf("%d SubjectAccessReviews for 2 rounds of %d questions; expect %d", n, len(tests), len(tests)-1)
	}
	// Groups in another order, same question: same cache entry.
	reordered := &auth.User{Name: "alice", UID: "u-alice", Groups: []string{"devs"}}
	ar.Authorize(context.Background(), auth.Attributes{User: reordered, Verb: "list", Resource: "pods", Namespace: "a"})
	if _, n := api.Reviews(); n != int64(len(tests)-1) {
		t.Error("an identical question was asked again")
	}
	// A permission granted later is seen once the TTL has passed.
	api.SetRules(authtest.Rule{User: "alice", Verbs: []string{"list"}, Resource: "pods"})
	clock.add(11 * time.Second)
	if ok, _, _ := ar.Authorize(context.Background(), auth.Attributes{User: &alice, Verb: "list", Resource: "pods"}); !ok {
		t.Error("a new permission is not seen after the TTL")
	}
}

// FuzzParseStaticTokens: any file is parsed or refused, never a panic; a
// parsed file never lets the empty token in, and errors never quote input
// beyond the line number.
func FuzzParseStaticTokens(f *testing.F) {
	f.Add([]byte("s3cret,alice,u1,\"a,b\"\nt2,bob,u2\n"))
	f.Add([]byte("# c\n\"q,uoted\",u,1\n"))
	f.Add([]byte("a,b,c,d,e\n"))
	f.Add([]byte("\"unterminated,b,c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := auth.ParseStaticTokens(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") && err.Error() != "no tokens" {
				t.Fatalf("error %q does not name a line", err)
			}
			return
		}
		if st.Len() == 0 {
			t.Fatal("parsed with no tokens")
		}
		if _, ok, _ := st.AuthenticateToken(context.Background(), ""); ok {
			t.Fatal("the empty token authenticated")
		}
	})
}

// TestTokenFloodLeavesKnownUsersAlone: random bearer tokens, from many
// addresses and then in a flood from one, while alice keeps asking from
// her own. Bad tokens must not evict her cached answer, the flooding
// address must be held to its review budget, and every one of alice's
// requests must be answered, including after her answer expires.
func TestTokenFloodLeavesKnownUsersAlone(t *testing.T) {
	api := authtest.New(t, map[string]auth.User{"alice-token": alice})
	clock := newClock()
	tr, err := auth.NewTokenReviewerForConfig(api.Config(), auth.TokenReviewOptions{
		Cache: auth.CacheOptions{Now: clock.now, MaxEntries: 64}})
	if err != nil {
		t.Fatal(err)
	}
	aliceCtx := auth.WithClientAddr(context.Background(), "10.0.0.7")
	aliceAsks := func(when string) {
		t.Helper()
		if u, ok, err := tr.AuthenticateToken(aliceCtx, "alice-token"); err != nil || !ok || u.Name != "alice" {
			t.Fatalf("%s: alice answered %+v %v %v", when, u, ok, err)
		}
	}
	aliceAsks("before the flood")

	// 150 distinct bad tokens, within each address's budget: all reviewed,
	// all denied, more than the 64 entries of the cache, faster than alice
	// asks again.
	for i := range 150 {
		ctx := auth.WithClientAddr(context.Background(), fmt.Sprintf("10.1.0.%d", i/10))
		if _, ok, err := tr.AuthenticateToken(ctx, fmt.Sprintf("random-%d", i)); ok || err != nil {
			t.Fatalf("random token %d: %v %v", i, ok, err)
		}
	}
	aliceAsks("after 150 bad tokens")
	if reviews, _ := api.Reviews(); reviews != 151 {
		t.Fatalf("%d reviews, want 151: alice's answer was evicted by denials", reviews)
	}

	// One address floods: it gets its burst (20), then 429s.
	flood := auth.WithClientAddr(context.Background(), "10.2.0.1")
	refused := 0
	for i := range 1000 {
		_, ok, err := tr.AuthenticateToken(flood, fmt.Sprintf("flood-%d", i))
		switch {
		case errors.Is(err, auth.ErrTooManyReviews):
			refused++
		case err != nil || ok:
			t.Fatalf("flood token %d: %v %v", i, ok, err)
		}
		if i%100 == 0 {
			aliceAsks(fmt.Sprintf("during the flood, %d", i))
		}
	}
	if reviews, _ := api.Reviews(); reviews != 171 || refused != 980 {
		t.Fatalf("%d reviews and %d refused for a flood of 1000 from one address; want 171 and 980", reviews, refused)
	}

	// Alice's answer expires while the flood goes on: her own address's
	// budget pays for her review.
	clock.add(11 * time.Second)
	for i := range 100 {
		tr.AuthenticateToken(flood, fmt.Sprintf("flood-again-%d", i))
	}
	aliceAsks("after her answer expired, during the flood")
	if reviews, _ := api.Reviews(); reviews > 171+20+1 {
		t.Fatalf("%d reviews: the flooding address got more than its budget of 5/s over 11s", reviews)
	}
}

// TestTokenFloodFromAKnownUsersAddress: a flood of bogus tokens from the
// very address a known user asks from (one NAT, one ingress) must not lock
// that user out once her answer expires: a token the API server called
// valid lately is reviewed again without taking from the address's
// budget, which only strangers' tokens spend.
func TestTokenFloodFromAKnownUsersAddress(t *testing.T) {
	api := authtest.New(t, map[string]auth.User{"alice-token": alice})
	clock := newClock()
	tr, err := auth.NewTokenReviewerForConfig(api.Config(), auth.TokenReviewOptions{Cache: auth.CacheOptions{Now: clock.now}})
	if err != nil {
		t.Fatal(err)
	}
	shared := auth.WithClientAddr(context.Background(), "10.0.0.7")
	aliceAsks := func(when string) {
		t.Helper()
		if u, ok, err := tr.AuthenticateToken(shared, "alice-token"); err != nil || !ok || u.Name != "alice" {
			t.Fatalf("%s: alice answered %+v %v %v", when, u, ok, err)
		}
	}
	aliceAsks("before the flood")
	for round := range 3 {
		clock.add(11 * time.Second) // alice's answer expires; the address's budget refills
		refused := 0
		for i := range 1000 {
			_, ok, err := tr.AuthenticateToken(shared, fmt.Sprintf("flood-%d-%d", round, i))
			switch {
			case errors.Is(err, auth.ErrTooManyReviews):
				refused++
			case err != nil || ok:
				t.Fatalf("flood token %d: %v %v", i, ok, err)
			}
		}
		if refused < 950 {
			t.Fatalf("round %d: %d of 1,000 bogus tokens refused; expect the address held to its budget", round, refused)
		}
		aliceAsks(fmt.Sprintf("after round %d of the flood, her answer expired", round))
	}
	// A token valid once and revoked since is answered invalid, and from
	// then on is a stranger's again.
	api.SetTokens(map[string]auth.User{})
	clock.add(11 * time.Second)
	if _, ok, err := tr.AuthenticateToken(shared, "alice-token"); ok || err != nil {
		t.Fatalf("alice's revoked token: %v %v; expect invalid", ok, err)
	}
}

// TestCachedOnlyAsksNothing: under CachedOnly an access reviewer answers
// a question it decided before (allowed or denied, expired within its
// grace too) and fails any other with ErrNotCached, asking its API server
// nothing.
func TestCachedOnlyAsksNothing(t *testing.T) {
	api := authtest.New(t, nil, authtest.Rule{User: "alice", Verbs: []string{"list"}, Resource: "pods"})
	clock := newClock()
	ar, _ := auth.NewAccessReviewerForConfig(api.Config(), auth.AccessReviewOptions{Cache: auth.CacheOptions{Now: clock.now}})
	ctx := context.Background()
	allowed := auth.Attributes{User: &alice, Verb: "list", Resource: "pods"}
	denied := auth.Attributes{User: &bob, Verb: "list", Resource: "pods"}
	for _, at := range []auth.Attributes{allowed, denied} {
		if _, _, err := ar.Authorize(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	_, before := api.Reviews()
	only := auth.CachedOnly(ctx)
	if ok, _, err := ar.Authorize(only, allowed); !ok || err != nil {
		t.Errorf("alice, cached allowed: %v %v", ok, err)
	}
	if ok, _, err := ar.Authorize(only, denied); ok || err != nil {
		t.Errorf("bob, cached denied: %v %v", ok, err)
	}
	if _, _, err := ar.Authorize(only, auth.Attributes{User: &alice, Verb: "watch", Resource: "pods"}); !errors.Is(err, auth.ErrNotCached) {
		t.Errorf("a question never asked: %v; expect ErrNotCached", err)
	}
	clock.add(time.Minute) // past freshness, within the grace
	if ok, _, err := ar.Authorize(only, allowed); !ok || err != nil {
		t.Errorf("alice, cached allowed but expired: %v %v", ok, err)
	}
	if _, now := api.Reviews(); now != before {
		t.Errorf("%d reviews asked under CachedOnly; expect none", now-before)
	}
}

// TestCallerLeavesAHungReviewOnItsDeadline: a caller whose context ends
// while the API server has not answered its review gets its context's
// error then, the first caller too, while the review goes on; the answer,
// once given, is cached for the next caller.
func TestCallerLeavesAHungReviewOnItsDeadline(t *testing.T) {
	release := make(chan struct{})
	api := authtest.New(t, nil, authtest.Rule{User: "alice", Verbs: []string{"list"}, Resource: "pods"})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	cfg := api.Config()
	cfg.Host = hung.URL
	ar, _ := auth.NewAccessReviewerForConfig(cfg, auth.AccessReviewOptions{Cache: auth.CacheOptions{Timeout: time.Hour}})
	at := auth.Attributes{User: &alice, Verb: "list", Resource: "pods"}
	ctx, cancel := context.WithCancel(context.Background())
	asked := make(chan error)
	go func() {
		_, _, err := ar.Authorize(ctx, at)
		asked <- err
	}()
	cancel() // the review cannot have been answered: the server holds it
	if err := <-asked; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first caller, its context ended: %v; expect its context's error", err)
	}
	close(release)
	for { // the review, answered now, is cached
		if ok, _, err := ar.Authorize(auth.CachedOnly(context.Background()), at); ok && err == nil {
			break
		} else if !errors.Is(err, auth.ErrNotCached) {
			t.Fatalf("once answered: %v %v", ok, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
