package server

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestFleetWalkKeepsEveryClustersPlace: every cluster of a walk across
// clusters keeps its place from the first page, also one that gave that
// page no item (its matches sort after the page's) and one whose first
// answer held all its matches but gave the page only some. While only
// that cluster changes between pages (a pod deleted, one changed so that
// it sorts elsewhere, one created, and its simulated churn), the walk is
// the brute-force merge of the clusters' lists of the first page's
// moment, each pod as it was then, with that moment's total on every
// page.
func TestFleetWalkKeepsEveryClustersPlace(t *testing.T) {
	tf := startTestFleet(t, nil, AuthOptions{})
	lists := tf.churn(t, 0)
	ns := smallNamespace(t, lists)
	all := func(fleetPod) bool { return true }
	for _, tc := range []struct {
		what  string
		q     oracleQuestion
		quiet string // the one cluster that changes
		limit int
	}{
		{"c gives the first page nothing (a plain list: by cluster)", oracleQuestion{url.Values{}, all, byCNN}, "c", 10},
		{"a gives the first page nothing (sorted by cluster descending)",
			oracleQuestion{url.Values{"sort": {"-cluster,spec.nodeName"}}, all, func(x, y fleetPod) int {
				return cmp.Or(-strings.Compare(x.cluster, y.cluster), byText(x.node, y.node, false), byCNN(x, y))
			}}, "a", 10},
		{"b's first answer holds all its matches, the page some of them",
			oracleQuestion{url.Values{"namespace": {ns}}, func(p fleetPod) bool { return p.ns == ns }, byCNN}, "b",
			countIn(lists["a"], ns) + 2},
	} {
		t.Run(tc.what, func(t *testing.T) {
			lists := tf.churn(t, 0)
			want := tc.q.answer(lists)
			var later []fleetPod // the quiet cluster's matches after the first page
			for _, p := range want[tc.limit:] {
				if p.cluster == tc.quiet {
					later = append(later, p)
				}
			}
			if len(later) < 3 || len(want) <= tc.limit {
				t.Fatalf("%d matches, %d of %s after a first page of %d; the test needs more", len(want), len(later), tc.quiet, tc.limit)
			}
			got, totals := walk(t, tf.front, cloneValues(tc.q.params), tc.limit, func() {
				gone, moved := later[len(later)-1], later[len(later)-2]
				if err := tf.fx[tc.quiet].Sim.Delete("pods", gone.ns, gone.name); err != nil {
					t.Fatal(err)
				}
				tf.changePod(t, tc.quiet, moved.ns, moved.name, func(pod map[string]any) {
					pod["spec"].(map[string]any)["nodeName"] = "a-node-first"
					pod["status"].(map[string]any)["phase"] = "Failed"
				})
				tf.addPod(t, tc.quiet, later[0].ns, "zz-late")
				tf.churn(t, 3, tc.quiet)
			})
			if !slices.Equal(got, want) {
				t.Errorf("%v by %d while %s changes: %d items; expect the first page's moment's %d, each as it was then; extra or changed %v, missing or changed %v",
					tc.q.params, tc.limit, tc.quiet, len(got), len(want), differ(got, want), differ(want, got))
			}
			for i, n := range totals {
				if n != len(want) {
					t.Errorf("page %d's total %d; expect the first page's %d", i, n, len(want))
				}
			}
		})
	}
}

// smallNamespace is a namespace where every cluster holds from 3 to 15
// pods.
func smallNamespace(t *testing.T, lists map[string][]fleetPod) string {
	t.Helper()
	counts := map[string]map[string]int{}
	for n, list := range lists {
		for _, p := range list {
			if counts[p.ns] == nil {
				counts[p.ns] = map[string]int{}
			}
			counts[p.ns][n]++
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(counts)) {
		ok := len(counts[ns]) == len(lists)
		for _, k := range counts[ns] {
			ok = ok && k >= 3 && k <= 15
		}
		if ok {
			return ns
		}
	}
	t.Fatalf("no namespace holds from 3 to 15 pods in every cluster: %v", counts)
	return ""
}

func countIn(list []fleetPod, ns string) int {
	n := 0
	for _, p := range list {
		if p.ns == ns {
			n++
		}
	}
	return n
}

// differ is a's pods not in b, compared whole (as they were read).
func differ(a, b []fleetPod) []string {
	var out []string
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, fmt.Sprintf("%s(%s,%s)", p.id(), p.node, p.phase))
		}
	}
	return out
}

// changePod rewrites a pod of the cluster as change says.
func (tf *testFleet) changePod(t testing.TB, cluster, ns, name string, change func(pod map[string]any)) {
	t.Helper()
	o, _, err := tf.fx[cluster].Cache.Get("pods", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var pod map[string]any
	if err := json.Unmarshal(o.Raw(), &pod); err != nil {
		t.Fatal(err)
	}
	change(pod)
	delete(pod["metadata"].(map[string]any), "resourceVersion")
	b, _ := json.Marshal(pod)
	if err := tf.fx[cluster].Sim.Apply("pods", b); err != nil {
		t.Fatal(err)
	}
}

// FuzzFleetContinue: any continue token on a list across clusters, real
// ones cut short or changed among them, forged ones of the right
// question: never a 5xx (nor a panic), and an error is a Status that
// names the continue token (every other parameter is well formed).
func FuzzFleetContinue(f *testing.F) {
	tf := startTestFleet(f, nil, AuthOptions{})
	const params = "limit=5&sort=-cluster,spec.nodeName"
	q, _ := url.ParseQuery(params)
	digest := (&fleetQuestion{resource: "pods", q: q}).digest()
	first := fuzzGetT(f, tf.front, "/api/v1/pods?"+params)
	var page fleetPage
	if err := json.Unmarshal(first.Body.Bytes(), &page); err != nil || page.Metadata.Continue == "" {
		f.Fatalf("a first page: %d %v", first.Code, err)
	}
	tok := page.Metadata.Continue
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	f.Add(tok)
	f.Add(tok[:len(tok)/2])
	f.Add(tok + "A")
	f.Add(base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1]))
	for _, forged := range []string{
		`{"q":"` + digest + `","c":{}}`,
		`{"q":"` + digest + `","c":{"a":{"o":200},"b":{"o":-1},"c":{}}}`,
		`{"q":"` + digest + `","c":{"a":{"d":true,"n":-4},"b":{"t":"!!"},"c":{"t":"eyJyIjoicG9kcyJ9"}}}`,
		`{"q":"` + digest + `","c":{"a":{"t":"eyJyIjoicG9kcyIsImEiOiIiLCJxIjp0cnVlLCJzIjoic3BlYy5ub2RlTmFtZSIsInciOiJ4LTEiLCJwIjo1fQ"}}}`,
		`{"q":"` + digest + `","c":{"zz":{"d":true,"n":3}}}`,
		`{"q":"x","c":{"a":{}}}`,
		`null`, `[]`, `{"c":null}`,
	} {
		f.Add(base64.RawURLEncoding.EncodeToString([]byte(forged)))
	}
	f.Fuzz(func(t *testing.T, token string) {
		rec := fuzzGet(t, tf.front, "/api/v1/pods?"+params+"&continue="+url.QueryEscape(token))
		if rec.Code >= 400 && !strings.Contains(rec.Body.String(), "continue") {
			t.Fatalf("continue=%q: %d %s; expect the error to name the continue token", token, rec.Code, rec.Body)
		}
	})
}

// fuzzGetT is one request of a fuzz target's setup.
func fuzzGetT(f *testing.F, h http.Handler, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest(http.MethodGet, target, nil))
	return rec
}

// TestFleetWalkLeavesOutAClusterAddedMeanwhile: a cluster added to the
// fleet during a walk was not at its first page's moment: the walk's
// later pages leave it out (its slot says why) and end as the walk of
// the clusters it began with.
func TestFleetWalkLeavesOutAClusterAddedMeanwhile(t *testing.T) {
	tf := startTestFleet(t, nil, AuthOptions{})
	fleet := &fakeFleet{names: []string{"a", "b"}, servers: map[string]*Server{"a": tf.servers["a"], "b": tf.servers["b"]}}
	front := New(noCache{}, Options{Clusters: fleet, Shared: tf.servers["a"].opts.Shared, Logger: quiet()}).Handler()
	want := append(tf.own(t, "a"), tf.own(t, "b")...)
	params := url.Values{"limit": {"25"}}
	var got []fleetPod
	for page := 0; ; page++ {
		p := getFleetPage(t, front, "/api/v1/pods?"+params.Encode(), "")
		for _, it := range p.Items {
			got = append(got, readPod(t, it.Cluster, it.Object))
		}
		if page > 0 {
			if len(p.Clusters) != 3 || p.Clusters[2].Cluster != "c" || p.Clusters[2].Status != 503 || !strings.Contains(p.Clusters[2].Reason, "left out of this walk") {
				t.Fatalf("page %d: slots %+v; expect c's 503 saying it is left out", page, p.Clusters)
			}
		}
		if p.Metadata.Continue == "" {
			break
		}
		if page == 0 {
			fleet.names, fleet.servers["c"] = []string{"a", "b", "c"}, tf.servers["c"]
		}
		params.Set("continue", p.Metadata.Continue)
	}
	if !slices.Equal(got, want) {
		t.Errorf("a walk while c joins: %d items; expect a's and b's %d; extra %v, missing %v", len(got), len(want), differ(got, want), differ(want, got))
	}
}

// TestFleetTokenOfBeforeStillPages: a token made before every cluster
// kept its place from the first page holds an empty place for a cluster
// that gave the first page nothing; it still pages as it did, that
// cluster from its live cache, with its live total.
func TestFleetTokenOfBeforeStillPages(t *testing.T) {
	tf := startTestFleet(t, nil, AuthOptions{})
	params := url.Values{"limit": {"10"}, "cluster": {"a,b,c"}}
	first := getFleetPage(t, tf.front, "/api/v1/pods?"+params.Encode(), "")
	raw, _ := base64.RawURLEncoding.DecodeString(first.Metadata.Continue)
	var tok fleetToken
	if err := json.Unmarshal(raw, &tok); err != nil || tok.Clusters["b"].Continue == "" {
		t.Fatalf("the first page's token %s: %v; expect b's place before its first match", raw, err)
	}
	tok.Clusters["b"], tok.Clusters["c"] = clusterPlace{}, clusterPlace{} // as tokens were made before
	b, _ := json.Marshal(tok)
	params.Set("continue", base64.RawURLEncoding.EncodeToString(b))
	tf.addPod(t, "c", tf.own(t, "c")[0].ns, "zz-late") // after the first page: the live cache shows it
	var got []fleetPod
	for _, it := range first.Items {
		got = append(got, readPod(t, it.Cluster, it.Object))
	}
	cachetest.Eventually(t, "c's new pod is cached", func() bool { return len(tf.own(t, "c")) == len(tf.own(t, "a"))+4 })
	more, totals := walk(t, tf.front, params, 10, nil)
	got = append(got, more...)
	want := slices.Concat(tf.own(t, "a"), tf.own(t, "b"), tf.own(t, "c"))
	if !slices.Equal(got, want) {
		t.Errorf("an old token's walk: %d items; expect the live lists' %d; extra %v, missing %v", len(got), len(want), differ(got, want), differ(want, got))
	}
	if totals[0] != len(want) {
		t.Errorf("an old token's page: total %d; expect the live %d", totals[0], len(want))
	}
}
