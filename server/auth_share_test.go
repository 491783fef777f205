package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/auth/authtest"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// A restricted list across namespaces asks about the namespaces that hold
// objects of the resource only, not about every namespace kubeindex knows: with 2,000 namespaces known and pods
// in a few, a handful of reviews, not 2,000 (which at the review client's
// 100 a second took 20s).
func TestRestrictedListAsksAboutNamespacesWithObjectsOnly(t *testing.T) {
	e := startAuth(t, Options{})
	for i := range 2000 {
		if err := e.ss.f.Sim.Apply("namespaces", fmt.Appendf(nil,
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"tenant-%04d"}}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	cachetest.Eventually(t, "2,000 more namespaces are known", func() bool { return len(e.ss.f.Cache.Namespaces()) >= 2000 })
	withPods, err := e.ss.f.Cache.NamespacesOf("pods")
	if err != nil {
		t.Fatal(err)
	}
	if len(withPods) > 100 {
		t.Fatalf("pods are in %d namespaces; the test wants few", len(withPods))
	}
	want := slices.Sorted(func(yield func(string) bool) {
		for k := range cachetest.State(t, e.ss.f.Cache, "pods", cache.ListQuery{Namespace: "team-a"}) {
			if !yield(k) {
				return
			}
		}
	})
	_, before := e.api.Reviews()
	for range 3 {
		resp, body := e.get(t, "/api/v1/pods", "alice-token")
		if resp.StatusCode != 200 || !slices.Equal(itemKeys(body), want) {
			t.Fatalf("alice's list: %d %v; expect 200 %v", resp.StatusCode, itemKeys(body), want)
		}
	}
	_, after := e.api.Reviews()
	// One cluster-wide question, then one per namespace holding pods, once:
	// the answers are cached.
	if n := after - before; n > int64(1+len(withPods)) {
		t.Errorf("3 restricted lists cost %d access reviews; expect at most %d (1 + %d namespaces holding pods, of %d known)",
			n, 1+len(withPods), len(withPods), len(e.ss.f.Cache.Namespaces()))
	}
}

// A caller allowed to list only where the resource has no object gets an
// empty list, not a 403.
func TestRestrictedListInNamespacesWithoutObjectsIsEmpty(t *testing.T) {
	e := startAuth(t, Options{})
	if err := e.ss.f.Sim.Apply("namespaces", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"quiet"}}`)); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the namespace quiet is known", func() bool { return slices.Contains(e.ss.f.Cache.Namespaces(), "quiet") })
	e.api.SetRules(authtest.Rule{User: "alice", Verbs: []string{"list"}, Resource: "pods", Namespace: "quiet"})
	if resp, body := e.get(t, "/api/v1/pods", "alice-token"); resp.StatusCode != 200 || len(itemKeys(body)) != 0 {
		t.Errorf("a list allowed only in a namespace without pods: %d %s; expect 200, no items", resp.StatusCode, body)
	}
	if resp, _ := e.get(t, "/api/v1/pods", "nobody-token"); resp.StatusCode != 403 {
		t.Errorf("a list allowed nowhere: %d; expect 403", resp.StatusCode)
	}
}

// A caller allowed in the whole namespace costs one review for every name,
// not one per name.
func TestGetsOfManyNamesCostOneReview(t *testing.T) {
	e := startAuth(t, Options{})
	_, before := e.api.Reviews()
	for i := range 50 {
		if resp, body := e.get(t, fmt.Sprintf("/api/v1/pods/team-a/no-such-pod-%d", i), "alice-token"); resp.StatusCode != 404 {
			t.Fatalf("a pod that does not exist: %d %s; expect 404", resp.StatusCode, body)
		}
		if resp, _ := e.get(t, fmt.Sprintf("/k8s/api/v1/namespaces/team-a/pods/no-such-pod-%d", i), "alice-token"); resp.StatusCode != 404 {
			t.Fatalf("the same through the Kubernetes API: %d; expect 404", resp.StatusCode)
		}
	}
	// One question for every name: get in team-a; and one more, whether
	// alice may list pods cluster-wide, which decides whether an answer
	// carries freshness details.
	if _, after := e.api.Reviews(); after-before > 2 {
		t.Errorf("100 GETs of new names in a namespace alice may read cost %d access reviews; expect 2", after-before)
	}
	// Refused in the namespace: the name itself is asked about, and refused.
	if resp, _ := e.get(t, "/api/v1/pods/team-b/b-0", "alice-token"); resp.StatusCode != 403 {
		t.Errorf("a pod of team-b: %d; expect 403", resp.StatusCode)
	}
}

// All users share one review client, so one user asking for many reviews
// (new names, one review each) could make everyone else's questions wait
// behind its own until they timed out: 503s for others. Each user has a
// fair share of the reviews in flight; the flooder waits for itself.
func TestReviewFloodOfOneUserLeavesOthersAnswered(t *testing.T) {
	users := map[string]auth.User{"mallory-token": {Name: "mallory", UID: "m"}}
	var rules []authtest.Rule
	for i := range 10 {
		users[fmt.Sprintf("user-%d-token", i)] = auth.User{Name: fmt.Sprintf("user-%d", i), UID: fmt.Sprint(i)}
		rules = append(rules, authtest.Rule{User: fmt.Sprintf("user-%d", i), Verbs: []string{"get"}, Resource: "pods", Namespace: "team-a"})
	}
	api := authtest.New(t, users, rules...)
	tr, _ := auth.NewTokenReviewerForConfig(api.Config(), auth.TokenReviewOptions{})
	// A review client slower than production's (100/s), so that a flood
	// fills its queue with few requests; its queue is served in turn.
	cfg := api.Config()
	cfg.QPS, cfg.Burst = 20, 20
	sar, err := authzclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ar := auth.NewAccessReviewer(sar.SubjectAccessReviews(), auth.AccessReviewOptions{InFlightPerUser: 2})
	ss := startStreams(t, Options{Logger: quiet(), Auth: AuthOptions{Authenticator: tr, Authorizer: ar, Timeout: 3 * time.Second}})
	if err := ss.f.Sim.Apply("pods", teamPod("team-a", "a-0", "10.77.0.1")); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the pod is cached", func() bool {
		_, _, err := ss.f.Cache.Get("pods", "team-a", "a-0")
		return err == nil
	})
	e := &authEnv{api: api, ss: ss}

	// mallory asks for names nobody lets it read, each a new review, from
	// 100 connections at once, until the others are done.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	malloryCodes := map[int]int{}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	for w := range 100 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/pods/team-a/m-%d-%d", ss.url, w, i), nil)
				req.Header.Set("Authorization", "Bearer mallory-token")
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				mu.Lock()
				malloryCodes[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	defer func() { stop(); wg.Wait() }()
	cachetest.Eventually(t, "the flood fills the review client's queue", func() bool { _, n := api.Reviews(); return n >= 60 })

	for i := range 10 {
		resp, body := e.get(t, "/api/v1/pods/team-a/a-0", fmt.Sprintf("user-%d-token", i))
		if resp.StatusCode != 200 {
			t.Errorf("user-%d during mallory's flood: %d %s; expect 200", i, resp.StatusCode, body)
		}
	}
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if malloryCodes[403] == 0 || malloryCodes[200] > 0 {
		t.Errorf("mallory's answers: %v; expect 403s (and 429 or 503 for those that waited too long)", malloryCodes)
	}
	t.Logf("mallory's answers: %v", malloryCodes)
}
