package server

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// fleetPod is what these tests read of a pod: enough to filter, sort and
// count independently of the query package.
type fleetPod struct {
	cluster, ns, name, node, phase string
}

func (p fleetPod) id() string { return p.cluster + ":" + p.ns + "/" + p.name }

// testFleet is three in-process clusters, a, b and c, of the same
// simulated cluster made to differ (b lost pods, c gained some), and the
// front serving them.
type testFleet struct {
	fx      map[string]*cachetest.Fixture
	servers map[string]*Server
	front   http.Handler
}

func startTestFleet(t testing.TB, clusterAuth func(cluster string) auth.Authorizer, front AuthOptions) *testFleet {
	t.Helper()
	tf := &testFleet{fx: map[string]*cachetest.Fixture{}, servers: map[string]*Server{}}
	shared := NewShared(LimitOptions{}, StreamOptions{})
	names := []string{"a", "b", "c"}
	for _, n := range names {
		tf.fx[n] = cachetest.Start(t, cachetest.PodSpec())
		opts := Options{ClusterName: n, Shared: shared, Logger: quiet()}
		if clusterAuth != nil {
			opts.Auth = AuthOptions{Authenticator: front.Authenticator, Authorizer: clusterAuth(n)}
		}
		tf.servers[n] = New(tf.fx[n].Cache, opts)
	}
	pods := tf.own(t, "b")
	for _, p := range pods[:5] {
		if err := tf.fx["b"].Sim.Delete("pods", p.ns, p.name); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		tf.addPod(t, "c", pods[i*7].ns, fmt.Sprintf("extra-%d", i))
	}
	cachetest.Eventually(t, "b and c changed", func() bool {
		return len(tf.own(t, "b")) == len(pods)-5 && len(tf.own(t, "c")) == len(pods)+3
	})
	fleet := &fakeFleet{names: append(names, "down"), servers: map[string]*Server{"down": nil}}
	for _, n := range names {
		fleet.servers[n] = tf.servers[n]
	}
	tf.front = New(noCache{}, Options{Clusters: fleet, Shared: shared, Auth: front, Logger: quiet()}).Handler()
	return tf
}

// addPod writes a copy of the cluster's first pod under another name.
func (tf *testFleet) addPod(t testing.TB, cluster, ns, name string) {
	t.Helper()
	res, err := tf.fx[cluster].Cache.List("pods", cache.ListQuery{Namespace: ns})
	if err != nil || len(res.Items) == 0 {
		t.Fatalf("no pod to copy in %s: %v", ns, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(res.Items[0].Raw(), &obj); err != nil {
		t.Fatal(err)
	}
	meta := obj["metadata"].(map[string]any)
	meta["name"], meta["uid"] = name, "uid-"+cluster+"-"+name
	delete(meta, "resourceVersion")
	b, _ := json.Marshal(obj)
	if err := tf.fx[cluster].Sim.Apply("pods", b); err != nil {
		t.Fatal(err)
	}
}

// own is the cluster's pods as its cache lists them, plainly.
func (tf *testFleet) own(t testing.TB, cluster string) []fleetPod {
	t.Helper()
	res, err := tf.fx[cluster].Cache.List("pods", cache.ListQuery{})
	if err != nil {
		t.Fatalf("cluster %s's own list: %v", cluster, err)
	}
	out := make([]fleetPod, len(res.Items))
	for i, o := range res.Items {
		out[i] = readPod(t, cluster, o.Raw())
	}
	return out
}

func readPod(t testing.TB, cluster string, raw []byte) fleetPod {
	t.Helper()
	var p struct {
		Metadata struct{ Namespace, Name string }
		Spec     struct{ NodeName string }
		Status   struct{ Phase string }
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return fleetPod{cluster, p.Metadata.Namespace, p.Metadata.Name, p.Spec.NodeName, p.Status.Phase}
}

// fleetPage is a page of a list across clusters as a client reads it.
type fleetPage struct {
	Kind     string
	Metadata struct {
		Continue           string
		RemainingItemCount int
		TotalItemCount     int
	}
	Clusters []ClusterSlot
	Items    []struct {
		Cluster string
		Object  json.RawMessage
	}
}

func getFleetPage(t *testing.T, h http.Handler, target string, token string) fleetPage {
	t.Helper()
	req := localRequest("GET", target, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var p fleetPage
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 200 || p.Kind != "FleetList" {
		t.Fatalf("%s: %d %.300s %v", target, rec.Code, rec.Body, err)
	}
	return p
}

// walk reads every page of a question across clusters, limit at a time,
// calling between (if not nil) after the first page.
func walk(t *testing.T, h http.Handler, params url.Values, limit int, between func()) (items []fleetPod, totals []int) {
	t.Helper()
	params.Set("limit", fmt.Sprint(limit))
	for page := 0; ; page++ {
		p := getFleetPage(t, h, "/api/v1/pods?"+params.Encode(), "")
		if len(p.Items) > limit {
			t.Fatalf("page %d has %d items, more than %d", page, len(p.Items), limit)
		}
		for _, it := range p.Items {
			items = append(items, readPod(t, it.Cluster, it.Object))
		}
		totals = append(totals, p.Metadata.TotalItemCount)
		if p.Metadata.Continue == "" {
			return items, totals
		}
		if page == 0 && between != nil {
			between()
		}
		params.Set("continue", p.Metadata.Continue)
	}
}

func ids(ps []fleetPod) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.id()
	}
	return out
}

// TestListAcrossClustersIsTheUnion: a list across clusters, plain or
// asked (filter and sort naming the cluster), paged with limit, offset
// and continue, is the union of each cluster's own list, filtered and
// ordered here independently: by the sort, then cluster, namespace, name.
func TestListAcrossClustersIsTheUnion(t *testing.T) {
	tf := startTestFleet(t, nil, AuthOptions{})
	var union []fleetPod
	for _, n := range []string{"a", "b", "c"} {
		union = append(union, tf.own(t, n)...)
	}

	// A plain list: the clusters one after another, each by namespace
	// and name.
	slices.SortStableFunc(union, func(x, y fleetPod) int {
		return cmp.Or(strings.Compare(x.cluster, y.cluster), strings.Compare(x.ns, y.ns), strings.Compare(x.name, y.name))
	})
	got, totals := walk(t, tf.front, url.Values{}, 37, nil)
	if !slices.Equal(ids(got), ids(union)) {
		t.Errorf("plain list across clusters: %d items, expect the %d of a, b and c in order", len(got), len(union))
	}
	if totals[0] != len(union) {
		t.Errorf("plain list: total %d, expect %d", totals[0], len(union))
	}

	// A question: Running pods out of cluster b, by node then cluster
	// descending.
	var want []fleetPod
	for _, p := range union {
		if p.cluster != "b" && p.phase == "Running" {
			want = append(want, p)
		}
	}
	slices.SortStableFunc(want, func(x, y fleetPod) int {
		if (x.node == "") != (y.node == "") {
			return cmp.Compare(len(y.node), len(x.node)) // missing last
		}
		return cmp.Or(strings.Compare(x.node, y.node), -strings.Compare(x.cluster, y.cluster),
			strings.Compare(x.ns, y.ns), strings.Compare(x.name, y.name))
	})
	if len(want) < 20 {
		t.Fatalf("only %d pods match; the test needs more", len(want))
	}
	q := url.Values{"filter": {"cluster!=b", "status.phase=Running"}, "sort": {"spec.nodeName,-cluster"}}
	for _, limit := range []int{1, 7, 1000} {
		got, totals := walk(t, tf.front, cloneValues(q), limit, nil)
		if !slices.Equal(ids(got), ids(want)) {
			t.Errorf("limit %d: %d items %v…; expect %d %v…", limit, len(got), ids(got)[:min(5, len(got))], len(want), ids(want)[:5])
		}
		for _, n := range totals {
			if n != len(want) {
				t.Errorf("limit %d: a page's total %d, expect %d", limit, n, len(want))
			}
		}
	}
	q.Set("offset", "9")
	q.Set("limit", "5")
	p := getFleetPage(t, tf.front, "/api/v1/pods?"+q.Encode(), "")
	var page []fleetPod
	for _, it := range p.Items {
		page = append(page, readPod(t, it.Cluster, it.Object))
	}
	if !slices.Equal(ids(page), ids(want[9:14])) {
		t.Errorf("offset 9 limit 5: %v; expect %v", ids(page), ids(want[9:14]))
	}
	if p.Metadata.RemainingItemCount != len(want)-14 {
		t.Errorf("offset 9 limit 5: remaining %d, expect %d", p.Metadata.RemainingItemCount, len(want)-14)
	}

	// The same pods in a and in c tie on every key but the cluster: the
	// cluster decides, then namespace and name.
	p = getFleetPage(t, tf.front, "/api/v1/pods?sort=-status.phase&cluster=c,a&limit=4", "")
	if len(p.Items) != 4 || p.Items[0].Cluster != "a" || p.Items[1].Cluster != "c" || string(p.Items[0].Object) != string(p.Items[1].Object) && readPod(t, "", p.Items[0].Object).name != readPod(t, "", p.Items[1].Object).name {
		t.Errorf("ties across clusters: %s %s %s; expect a's pod, then c's same pod", p.Items[0].Cluster, p.Items[1].Cluster, p.Items[2].Cluster)
	}
	if len(p.Clusters) != 2 || p.Clusters[0].Cluster != "c" || p.Clusters[1].Cluster != "a" {
		t.Errorf("?cluster=c,a: slots %+v; expect c's then a's", p.Clusters)
	}

	// A cluster not serving has its slot, and the answer is the others'.
	p = getFleetPage(t, tf.front, "/api/v1/pods?limit=1", "")
	if len(p.Clusters) != 4 || p.Clusters[3].Cluster != "down" || p.Clusters[3].Status != 503 || !strings.Contains(p.Clusters[3].Reason, "connection refused") {
		t.Errorf("slots %+v; expect down's 503 with its reason", p.Clusters)
	}
	for _, s := range p.Clusters[:3] {
		if s.Status != 200 || s.State != ClusterSynced || s.Total == nil || s.ResourceVersion == "" {
			t.Errorf("slot %+v; expect 200, synced, its total and resourceVersion", s)
		}
	}
	// Projections apply to each object, the cluster stays beside it.
	p = getFleetPage(t, tf.front, "/api/v1/pods?fields=status.phase&limit=2&sort=cluster", "")
	if len(p.Items) != 2 || p.Items[0].Cluster != "a" || strings.Contains(string(p.Items[0].Object), `"spec"`) || !strings.Contains(string(p.Items[0].Object), `"phase"`) {
		t.Errorf("fields across clusters: %+v", p.Items)
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// TestFleetWalkAcrossChanges: pods added and deleted in the clusters
// between pages do not make a walk repeat or skip any pod that existed
// for its whole duration.
func TestFleetWalkAcrossChanges(t *testing.T) {
	tf := startTestFleet(t, nil, AuthOptions{})
	before := map[string]bool{}
	for _, n := range []string{"a", "b", "c"} {
		for _, p := range tf.own(t, n) {
			before[p.id()] = true
		}
	}
	var deleted []string
	for _, q := range []url.Values{{"sort": {"-status.phase,cluster"}}, {}} {
		got, _ := walk(t, tf.front, q, 10, func() {
			for _, n := range []string{"a", "c"} {
				pods := tf.own(t, n)
				p := pods[len(pods)/2]
				if err := tf.fx[n].Sim.Delete("pods", p.ns, p.name); err != nil {
					t.Fatal(err)
				}
				deleted = append(deleted, p.id())
				tf.addPod(t, n, p.ns, "late-"+p.name)
			}
			cachetest.Eventually(t, "the changes are cached", func() bool {
				for _, id := range deleted[len(deleted)-2:] {
					cl, key, _ := strings.Cut(id, ":")
					ns, name, _ := strings.Cut(key, "/")
					if _, _, err := tf.fx[cl].Cache.Get("pods", ns, name); err == nil {
						return false
					}
				}
				return true
			})
		})
		seen := map[string]int{}
		for _, p := range got {
			seen[p.id()]++
		}
		for id, n := range seen {
			if n > 1 {
				t.Errorf("%v: %s seen %d times", q, id, n)
			}
		}
		for id := range before {
			if seen[id] == 0 && !slices.Contains(deleted, id) {
				t.Errorf("%v: %s existed throughout and was not seen", q, id)
			}
		}
	}
}

// TestCountsAcrossClusters: counts across clusters are the sums of what
// each cluster holds, grouped by cluster and another key as computed
// here from each cluster's own list.
func TestCountsAcrossClusters(t *testing.T) {
	tf := startTestFleet(t, nil, AuthOptions{})
	want := map[string]int{}
	total := 0
	for _, n := range []string{"a", "b", "c"} {
		for _, p := range tf.own(t, n) {
			if p.phase != "Pending" {
				want[n+"|"+p.phase]++
				total++
			}
		}
	}
	rec := do(t, tf.front, "GET", "/api/v1/resources/pods/counts?groupBy=cluster,status.phase&filter=status.phase!=Pending")
	var got FleetCountsResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 {
		t.Fatalf("counts: %d %s", rec.Code, rec.Body)
	}
	gotGroups := map[string]int{}
	for _, g := range got.Groups {
		gotGroups[g.Values[0].String()+"|"+g.Values[1].String()] = g.Count
	}
	if got.Total != total || !mapsEqual(gotGroups, want) || strings.Join(got.GroupBy, ",") != "cluster,status.phase" {
		t.Errorf("counts: total %d groups %v by %v; expect %d %v", got.Total, gotGroups, got.GroupBy, total, want)
	}
	if len(got.Clusters) != 4 || got.Clusters[3].Status != 503 {
		t.Errorf("counts' slots: %+v", got.Clusters)
	}
	// By phase alone: each phase summed over the clusters; by cluster
	// alone: each cluster's total; filtered by cluster: that cluster's.
	rec = do(t, tf.front, "GET", "/api/v1/resources/pods/counts?groupBy=status.phase&filter=status.phase!=Pending&filter=cluster+in+(a,c)")
	got = FleetCountsResponse{}
	json.Unmarshal(rec.Body.Bytes(), &got)
	for _, g := range got.Groups {
		if ph := g.Values[0].String(); g.Count != want["a|"+ph]+want["c|"+ph] {
			t.Errorf("phase %s over a and c: %d, expect %d", ph, g.Count, want["a|"+ph]+want["c|"+ph])
		}
	}
	rec = do(t, tf.front, "GET", "/api/v1/resources/pods/counts?groupBy=cluster")
	got = FleetCountsResponse{}
	json.Unmarshal(rec.Body.Bytes(), &got)
	for _, g := range got.Groups {
		if n := len(tf.own(t, g.Values[0].String())); g.Count != n {
			t.Errorf("cluster %s: %d, expect %d", g.Values[0], g.Count, n)
		}
	}
	if len(got.Groups) != 3 {
		t.Errorf("by cluster: %d groups, expect 3", len(got.Groups))
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestFleetQuestionErrors: a parameter no cluster can read is the
// caller's 400, whichever cluster reads it; an unknown resource in every
// cluster is 404; a watch that is no stream request is told how to open one.
func TestFleetQuestionErrors(t *testing.T) {
	tf := startTestFleet(t, nil, AuthOptions{})
	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{"/api/v1/pods?filter=age>abc", 400, "filter"},
		{"/api/v1/pods?sort=cluster,", 400, "sort"},
		{"/api/v1/pods?cluster=zz", 400, "no such cluster"},
		{"/api/v1/pods?continue=nope", 400, "continue"},
		{"/api/v1/pods?watch=true", 400, "Accept: text/event-stream"},
		{"/api/v1/nopes", 404, "no cluster serves"},
		{"/api/v1/resources/pods/counts?groupBy=a,b,c", 400, "groupBy"},
	} {
		rec := do(t, tf.front, "GET", tc.path)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.says) {
			t.Errorf("%s: %d %s; expect %d saying %q", tc.path, rec.Code, rec.Body, tc.code, tc.says)
		}
	}
	// A token is the question's: asked with another filter, refused.
	p := getFleetPage(t, tf.front, "/api/v1/pods?limit=3&sort=cluster", "")
	rec := do(t, tf.front, "GET", "/api/v1/pods?limit=3&sort=-cluster&continue="+p.Metadata.Continue)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "another question") {
		t.Errorf("a token under another sort: %d %s", rec.Code, rec.Body)
	}
}

// fixedAuthorizer allows what allow says.
type fixedAuthorizer func(a auth.Attributes) bool

func (f fixedAuthorizer) Authorize(_ context.Context, a auth.Attributes) (bool, string, error) {
	return f(a), "", nil
}

// TestFleetListAuthorizedPerCluster: a caller allowed in a, in one
// namespace of c and not in b sees a's pods, c's of that namespace and
// none of b's, in the items, the totals and the counts; b's slot is a 403
// that says nothing more.
func TestFleetListAuthorizedPerCluster(t *testing.T) {
	st, err := auth.ParseStaticTokens([]byte("s3cret,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	var ns string
	tf := startTestFleet(t, func(cluster string) auth.Authorizer {
		return fixedAuthorizer(func(a auth.Attributes) bool {
			switch cluster {
			case "a":
				return true
			case "c":
				return a.Namespace != "" && a.Namespace == ns
			}
			return false
		})
	}, AuthOptions{Authenticator: st})
	cPods := tf.own(t, "c")
	ns = cPods[0].ns
	var want []string
	for _, p := range append(tf.own(t, "a"), cPods...) {
		if p.cluster == "a" || p.ns == ns {
			want = append(want, p.id())
		}
	}
	var got []string
	target := "/api/v1/pods?limit=25"
	var first fleetPage
	for {
		p := getFleetPage(t, tf.front, target, "s3cret")
		if first.Kind == "" {
			first = p
		}
		for _, it := range p.Items {
			got = append(got, readPod(t, it.Cluster, it.Object).id())
		}
		if p.Metadata.Continue == "" {
			break
		}
		target = "/api/v1/pods?limit=25&continue=" + p.Metadata.Continue
	}
	if !slices.Equal(got, want) {
		t.Errorf("alice sees %d pods, expect %d (a's and c's in %s)", len(got), len(want), ns)
	}
	if first.Metadata.TotalItemCount != len(want) {
		t.Errorf("alice's total %d, expect %d", first.Metadata.TotalItemCount, len(want))
	}
	if b := first.Clusters[1]; b.Cluster != "b" || b.Status != 403 || b.Reason != "" || b.Total != nil {
		t.Errorf("b's slot %+v; expect a bare 403", b)
	}
	req := localRequest("GET", "/api/v1/resources/pods/counts?groupBy=cluster", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	rec := httptest.NewRecorder()
	tf.front.ServeHTTP(rec, req)
	var counts FleetCountsResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &counts); err != nil || counts.Total != len(want) {
		t.Errorf("alice's counts: %d %s; expect total %d", rec.Code, rec.Body, len(want))
	}
	for _, g := range counts.Groups {
		if g.Values[0].String() == "b" {
			t.Errorf("alice's counts have a group for b: %+v", g)
		}
	}
	rec = httptest.NewRecorder()
	tf.front.ServeHTTP(rec, localRequest("GET", "/api/v1/pods", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, expect 401", rec.Code)
	}
}
