package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/auth/authtest"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// hungAuthorizer is the authorizer of a cluster whose API server hangs:
// every review blocks until its context ends. It remembers the deadlines
// it was given.
type hungAuthorizer struct {
	mu        sync.Mutex
	deadlines []time.Time
}

func (h *hungAuthorizer) Authorize(ctx context.Context, _ auth.Attributes) (bool, string, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Time{} // no deadline: the test fails on it
	}
	h.mu.Lock()
	h.deadlines = append(h.deadlines, dl)
	h.mu.Unlock()
	<-ctx.Done()
	return false, "", ctx.Err()
}

func (h *hungAuthorizer) seen() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.deadlines)
}

// askFleet asks the front as the caller with token.
func askFleet(t *testing.T, h http.Handler, method, target, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	var req *http.Request
	if body != "" {
		req = localRequest(method, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = localRequest(method, target, nil)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestFleetAnswersBesideAHungAuthorizer: with cluster b's access reviews
// hanging (its API server does not answer) and an authorization timeout
// of an hour, a list, counts, an IP lookup and a batch across clusters
// answer with a's and c's parts and b's slot a 503 saying authorization
// could not be asked; b's reviews were given the short per-cluster
// deadline, not the hour. On code that waits for the authorization
// timeout, the test runs into go test's own timeout.
func TestFleetAnswersBesideAHungAuthorizer(t *testing.T) {
	st, err := auth.ParseStaticTokens([]byte("s3cret,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	hung := &hungAuthorizer{}
	tf := startTestFleet(t, func(cluster string) auth.Authorizer {
		if cluster == "b" {
			return hung
		}
		return fixedAuthorizer(func(auth.Attributes) bool { return true })
	}, AuthOptions{Authenticator: st})
	const clusterTimeout = 50 * time.Millisecond
	for _, s := range tf.servers {
		s.opts.Auth.Timeout, s.opts.Auth.ClusterTimeout = time.Hour, clusterTimeout
	}
	started := time.Now()

	says := func(what string, status int, answer string) {
		t.Helper()
		if status != http.StatusServiceUnavailable || !strings.Contains(answer, "authorization could not be asked") ||
			!strings.Contains(answer, `did not answer the access review within 50ms`) {
			t.Errorf("%s: b's slot %d %s; expect a 503 saying authorization could not be asked", what, status, answer)
		}
	}

	p := getFleetPage(t, tf.front, "/api/v1/pods?limit=1000", "s3cret")
	says("list", p.Clusters[1].Status, p.Clusters[1].Reason)
	if p.Clusters[1].Total != nil {
		t.Errorf("list: b's slot has a total: %+v", p.Clusters[1])
	}
	seen := map[string]int{}
	for _, it := range p.Items {
		seen[it.Cluster]++
	}
	if seen["b"] != 0 || seen["a"] != len(tf.own(t, "a")) || seen["c"] != len(tf.own(t, "c")) {
		t.Errorf("list: items per cluster %v; expect all of a's (%d) and c's (%d), none of b's", seen, len(tf.own(t, "a")), len(tf.own(t, "c")))
	}

	rec := askFleet(t, tf.front, "GET", "/api/v1/resources/pods/counts?groupBy=cluster", "s3cret", "")
	var counts FleetCountsResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &counts); err != nil || rec.Code != 200 || len(counts.Clusters) != 4 {
		t.Fatalf("counts: %d %s", rec.Code, rec.Body)
	}
	says("counts", counts.Clusters[1].Status, counts.Clusters[1].Reason)
	if counts.Total != len(tf.own(t, "a"))+len(tf.own(t, "c")) {
		t.Errorf("counts: total %d; expect a's and c's", counts.Total)
	}
	for _, g := range counts.Groups {
		if g.Values[0].String() == "b" {
			t.Errorf("counts: a group for b: %+v", g)
		}
	}

	ip := podIP(t, tf.fx["a"])
	rec = askFleet(t, tf.front, "GET", "/api/v1/clusters/ip/"+ip, "s3cret", "")
	var lookup struct {
		HeldIn   []string
		Clusters []ClusterIPAnswer
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &lookup); err != nil || rec.Code != 200 || len(lookup.Clusters) != 4 {
		t.Fatalf("IP lookup: %d %s", rec.Code, rec.Body)
	}
	says("IP lookup", lookup.Clusters[1].Status, string(lookup.Clusters[1].Answer))
	if lookup.Clusters[0].Status != 200 || strings.Contains(strings.Join(lookup.HeldIn, ","), "b") {
		t.Errorf("IP lookup: %+v; expect a's answer and b left out of heldIn", lookup)
	}

	rec = askFleet(t, tf.front, "POST", "/api/v1/clusters/ip:lookup", "s3cret", `{"queries":[{"ip":"`+ip+`"}]}`)
	var batch struct{ Results []ClusterBatchResult }
	if err := json.Unmarshal(rec.Body.Bytes(), &batch); err != nil || rec.Code != 200 || len(batch.Results) != 1 || len(batch.Results[0].Clusters) != 4 {
		t.Fatalf("IP batch: %d %s", rec.Code, rec.Body)
	}
	says("IP batch", batch.Results[0].Clusters[1].Status, string(batch.Results[0].Clusters[1].Answer))

	deadlines := hung.seen()
	if len(deadlines) == 0 {
		t.Fatal("b's authorizer was never asked")
	}
	for _, dl := range deadlines {
		if dl.IsZero() || dl.After(started.Add(time.Hour/2)) {
			t.Errorf("b's review had the deadline %v (asked from %v); expect the per-cluster one", dl, started)
		}
	}

	// Under b's own prefix, the request asks and is bounded by the
	// authorization timeout, not the per-cluster one: here, it is still
	// waiting when the caller goes away.
	ctx, cancel := context.WithCancel(context.Background())
	req := localRequest("GET", "/clusters/b/api/v1/pods?limit=1", nil).WithContext(ctx)
	req.Header.Set("Authorization", "Bearer s3cret")
	done := make(chan struct{})
	before := len(deadlines)
	go func() {
		defer close(done)
		tf.front.ServeHTTP(httptest.NewRecorder(), req)
	}()
	cachetest.Eventually(t, "the prefixed request asks b", func() bool { return len(hung.seen()) > before })
	cancel()
	<-done
	if dl := hung.seen()[before]; !dl.After(started.Add(time.Hour / 2)) {
		t.Errorf("under b's prefix the review had the deadline %v; expect the authorization timeout's", dl)
	}
}

// podIP is the address of a running pod of the fixture's cluster.
func podIP(t *testing.T, f *cachetest.Fixture) string {
	t.Helper()
	res, err := f.Cache.List("pods", cache.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Items {
		var pod struct {
			Status struct{ PodIP string }
		}
		if json.Unmarshal(o.Raw(), &pod) == nil && pod.Status.PodIP != "" {
			return pod.Status.PodIP
		}
	}
	t.Fatal("no pod with an address")
	return ""
}

// TestStaleClusterIsNotAskedToAuthorize: once cluster b is stale and a
// review asked of its API server failed, a caller whose decision b cached
// before still gets b's part; another caller gets b's slot a 503 saying
// no decision is cached, and b's API server is not asked for either.
func TestStaleClusterIsNotAskedToAuthorize(t *testing.T) {
	st, err := auth.ParseStaticTokens([]byte("s3cret,alice,1\nb0b,bob,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	reviews := authtest.New(t, nil, authtest.Rule{User: "alice", Verbs: []string{"list"}, Resource: "pods"},
		authtest.Rule{User: "bob", Verbs: []string{"list"}, Resource: "pods"})
	var down atomic.Bool
	fb := cachetest.StartWith(t, cachetest.Config{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}}, cachetest.PodSpec())
	fa := cachetest.Start(t, cachetest.PodSpec())
	shared := NewShared(LimitOptions{}, StreamOptions{})
	sar, err := auth.NewAccessReviewerForConfig(reviews.Config(), auth.AccessReviewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := New(fa.Cache, Options{ClusterName: "a", Shared: shared, Logger: quiet(),
		Auth: AuthOptions{Authenticator: st, Authorizer: fixedAuthorizer(func(auth.Attributes) bool { return true })}})
	b := New(fb.Cache, Options{ClusterName: "b", Shared: shared, Logger: quiet(), Auth: AuthOptions{Authenticator: st, Authorizer: sar}})
	fleet := &fakeFleet{names: []string{"a", "b"}, servers: map[string]*Server{"a": a, "b": b}}
	front := New(noCache{}, Options{Clusters: fleet, Shared: shared, Auth: AuthOptions{Authenticator: st}, Logger: quiet()}).Handler()

	if p := getFleetPage(t, front, "/api/v1/pods?limit=1", "s3cret"); p.Clusters[1].Status != 200 {
		t.Fatalf("alice, b synced: %+v", p.Clusters[1])
	}
	down.Store(true)
	fb.Sim.DropWatches()
	cachetest.Eventually(t, "b is stale", func() bool { return StateOf("b", b.r).State == ClusterStale })
	// Stale alone is not enough: b's API server is asked until a review
	// fails.
	reviews.SetDown(true)
	p := getFleetPage(t, front, "/api/v1/pods?limit=1", "b0b")
	if s := p.Clusters[1]; s.Status != 503 || !strings.Contains(s.Reason, `authorization could not be asked: cluster "b"'s API server did not answer`) {
		t.Errorf("bob, b stale, its reviews failing: b's slot %+v; expect a 503 saying authorization could not be asked", s)
	}
	_, asked := reviews.Reviews()
	if asked == 0 {
		t.Fatal("b's API server was never asked")
	}

	p = getFleetPage(t, front, "/api/v1/pods?limit=1", "s3cret")
	if s := p.Clusters[1]; s.Status != 200 || s.State != ClusterStale || s.Total == nil || *s.Total == 0 {
		t.Errorf("alice, b stale: b's slot %+v; expect its stale part, from the decision cached", s)
	}
	p = getFleetPage(t, front, "/api/v1/pods?limit=1", "b0b")
	if s := p.Clusters[1]; s.Status != 503 || !strings.Contains(s.Reason, `authorization could not be asked: cluster "b" is stale and its API server did not answer`) ||
		!strings.Contains(s.Reason, "no decision for this caller is cached") {
		t.Errorf("bob, b stale: b's slot %+v; expect a 503 saying no decision is cached", s)
	}
	if p.Clusters[0].Status != 200 || p.Clusters[0].Total == nil || *p.Clusters[0].Total == 0 {
		t.Errorf("bob, b stale: a's slot %+v; expect its part", p.Clusters[0])
	}
	if _, now := reviews.Reviews(); now != asked {
		t.Errorf("b's API server was asked %d reviews while b was stale; expect none", now-asked)
	}
	// Under b's own prefix, b's API server is asked, as always.
	reviews.SetDown(false)
	rec := askFleet(t, front, "GET", "/clusters/b/api/v1/pods?limit=1", "b0b", "")
	if _, now := reviews.Reviews(); now == asked || rec.Code != 200 {
		t.Errorf("bob under b's prefix: %d %.200s, %d reviews; expect b asked (its API server answers reviews)", rec.Code, rec.Body, now-asked)
	}
}
