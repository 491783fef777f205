package browser

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestDashboardDemo opens the dashboard on `kubeindex --demo`, through a
// proxy that can cut the connection, and checks what a person would: the
// pods table holds what /api/v1/resources counts, the demo is labelled
// SIMULATED, rows change live, a node IP is shown as shared by hostNetwork
// pods, the keyboard opens and closes an object's detail with its diffs,
// and a dropped connection is resumed (or, against a server that cannot
// resume it, resynced) and said so.
func TestDashboardDemo(t *testing.T) {
	p := newPage(t)
	ki := startKubeindex(t, "--demo")
	px := startProxy(t, ki.Addr)
	p.run("opening the dashboard", chromedp.Navigate(px.URL()+"/#/pods"))

	tableMatchesAPI(t, p, ki.URL)
	var picker bool
	p.mustEval(`(() => { `+visibleJS+` return shown(document.getElementById('clusters')); })()`, &picker)
	if picker {
		t.Errorf("a single cluster shows the cluster picker")
	}
	startRV := podRV(t, ki.URL)
	if s := p.state(); !s.Simulated {
		t.Errorf("the SIMULATED badge is not shown in --demo: %v", s)
	}

	key := waitForLiveModification(t, p, ki.URL)
	lookUpNodeIP(t, p, ki.URL)
	keyboardDetail(t, p, key)

	shot := p.screenshot("dashboard-demo")
	if *updateScreenshot && shot != "" {
		b, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("screenshot-demo.png", b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	filterThroughTheForm(t, p, ki.URL)
	resumeAfterCut(t, p, px, ki.URL)
	resyncAgainstNewServer(t, p, px, ki, startRV)
	p.checkProblems()
}

// tableMatchesAPI waits until the live table holds as many objects as
// kubeindex reports for pods (the demo churns, so both are read together
// until they agree), and checks that only a window of rows is in the DOM.
func tableMatchesAPI(t *testing.T, p *page, api string) {
	t.Helper()
	p.waitFor(30*time.Second, "the pods table to match /api/v1/resources", func() (bool, string) {
		want := podStatus(t, api).Count
		s := p.state()
		return s.Stream == "live" && s.Count == want && s.Shown == want && s.RowCount == want+1,
			fmt.Sprintf("API count %d; page %v", want, s)
	})
	s := p.state()
	if s.DOMRows == 0 || s.DOMRows > s.Count {
		t.Errorf("%d row elements in the DOM for %d pods", s.DOMRows, s.Count)
	}
	if s.Title != "pods" {
		t.Errorf("view title %q; expect pods", s.Title)
	}
}

// waitForLiveModification waits for a row to show a MODIFIED event from
// the stream, then for that row to carry the resourceVersion kubeindex's
// REST API has for the object. It returns the object's key.
func waitForLiveModification(t *testing.T, p *page, api string) string {
	t.Helper()
	var row struct{ Key, RV string }
	p.waitFor(60*time.Second, "a row to show a live MODIFIED event", func() (bool, string) {
		p.mustEval(`(() => { const r = document.querySelector('.vt-body .vt-row[data-change="modified"]');
			return r ? {key: r.dataset.key, rv: r.dataset.rv} : {key: '', rv: ''}; })()`, &row)
		return row.Key != "", p.state().StreamText
	})
	p.waitFor(10*time.Second, "row "+row.Key+" to hold the object's current resourceVersion", func() (bool, string) {
		var obj struct {
			Metadata struct{ ResourceVersion string } `json:"metadata"`
		}
		getJSON(t, api+"/api/v1/pods/"+row.Key, &obj)
		var rv string
		p.mustEval(`document.querySelector('.vt-body .vt-row[data-key=`+jsString(row.Key)+`]')?.dataset.rv ?? 'not rendered'`, &rv)
		return rv == obj.Metadata.ResourceVersion, fmt.Sprintf("row rv %s, API rv %s", rv, obj.Metadata.ResourceVersion)
	})
	t.Logf("row %s changed live", row.Key)
	return row.Key
}

// lookUpNodeIP types a node's address into the IP box: every pod the API
// lists for it must be shown, each marked hostNetwork, and the match kind
// must say hostNetwork.
func lookUpNodeIP(t *testing.T, p *page, api string) {
	t.Helper()
	var pods struct {
		Items []struct {
			Spec   struct{ HostNetwork bool } `json:"spec"`
			Status struct{ PodIP string }     `json:"status"`
		} `json:"items"`
	}
	getJSON(t, api+"/api/v1/pods", &pods)
	ip := ""
	for _, it := range pods.Items {
		if it.Spec.HostNetwork && it.Status.PodIP != "" {
			ip = it.Status.PodIP
			break
		}
	}
	if ip == "" {
		t.Fatal("the demo has no hostNetwork pod with an IP")
	}
	var want struct {
		Match string `json:"match"`
		Pods  []struct {
			Namespace, Name string
		} `json:"pods"`
	}
	getJSON(t, api+"/api/v1/ip/"+url.PathEscape(ip), &want)
	if want.Match != "hostNetwork" || len(want.Pods) < 2 {
		t.Fatalf("setup: the API answers %s with match %q and %d pods; expect hostNetwork and several", ip, want.Match, len(want.Pods))
	}
	p.setValue("#ip-input", "")
	p.run("typing the IP", chromedp.SendKeys("#ip-input", ip+kb.Enter, chromedp.ByQuery))
	var got struct {
		Match string
		Rows  []struct {
			Key         string
			HostNetwork string
			Badge       string
		}
	}
	p.waitFor(10*time.Second, "the IP lookup result for "+ip, func() (bool, string) {
		p.mustEval(`(() => { `+visibleJS+` const r = document.getElementById('ip-result');
			return {match: shown(r) ? r.dataset.match : '', rows: [...r.querySelectorAll('tbody tr[data-kind="Pod"]')].map((tr) => ({
				key: tr.dataset.key, hostNetwork: tr.dataset.hostNetwork, badge: tr.querySelector('.badge-host')?.textContent ?? ''}))}; })()`, &got)
		return got.Match == "hostNetwork" && len(got.Rows) == len(want.Pods), fmt.Sprintf("%+v", got)
	})
	for i, r := range got.Rows {
		if wantKey := want.Pods[i].Namespace + "/" + want.Pods[i].Name; r.Key != wantKey {
			t.Errorf("IP lookup row %d is %s; the API lists %s", i, r.Key, wantKey)
		}
		if r.HostNetwork != "true" || r.Badge != "hostNetwork" {
			t.Errorf("IP lookup row %s is not marked hostNetwork: %+v", r.Key, r)
		}
	}
	var summary string
	p.mustEval(`document.querySelector('#ip-result .ip-summary').textContent`, &summary)
	t.Logf("IP lookup %s: %s", ip, summary)
}

// keyboardDetail finds a row with the keyboard, opens its detail with
// Enter, checks its JSON and its diffs, and closes it with Escape, focus
// going back to the row.
func keyboardDetail(t *testing.T, p *page, key string) {
	t.Helper()
	name := path.Base(key)
	// Narrow the table to the object with the row search, then tab into
	// the grid and arrow to the row.
	p.setValue("#quick", "")
	p.run("searching rows", chromedp.SendKeys("#quick", name, chromedp.ByQuery))
	p.waitFor(5*time.Second, "the search to narrow the table", func() (bool, string) {
		s := p.state()
		return s.Shown >= 1 && s.Shown < s.Count, s.String()
	})
	p.mustEval(`document.querySelector('.vt-body .vt-row[tabindex="0"]').focus()`, nil)
	p.run("arrowing to the row", chromedp.KeyEvent(kb.Home))
	var focused string
	for range 5 {
		p.mustEval(`document.activeElement?.dataset?.key ?? ''`, &focused)
		if focused == key {
			break
		}
		p.run("arrowing down", chromedp.KeyEvent(kb.ArrowDown))
	}
	if focused != key {
		t.Fatalf("could not reach row %s with the arrow keys (focus on %q)", key, focused)
	}
	p.run("opening the detail", chromedp.KeyEvent(kb.Enter))
	var d struct {
		Open    bool
		Title   string
		JSON    string
		Changes int
		Diff    string
	}
	detailJS := `(() => { ` + visibleJS + ` const d = document.getElementById('detail');
		return {open: shown(d), title: document.getElementById('detail-title').textContent,
			json: document.querySelector('#detail .json').textContent,
			changes: document.querySelectorAll('#detail .change[data-type="modified"]').length,
			diff: document.querySelector('#detail .change .diff')?.textContent ?? ''}; })()`
	p.waitFor(5*time.Second, "the detail panel", func() (bool, string) {
		p.mustEval(detailJS, &d)
		return d.Open && d.Title == key, fmt.Sprintf("%+v", d)
	})
	if want := `"name": ` + strconv.Quote(name); !strings.Contains(d.JSON, want) {
		t.Errorf("the detail JSON lacks %s", want)
	}
	p.run("showing the changes", chromedp.Click("#tab-changes", chromedp.ByQuery))
	p.waitFor(5*time.Second, "a diff in the object's changes", func() (bool, string) {
		p.mustEval(detailJS, &d)
		return d.Changes > 0 && d.Diff != "", fmt.Sprintf("%d changes, diff %q", d.Changes, d.Diff)
	})
	t.Logf("diff of %s:\n%s", key, d.Diff)
	p.screenshot("dashboard-demo-detail")
	p.run("closing the detail", chromedp.KeyEvent(kb.Escape))
	p.waitFor(5*time.Second, "the detail to close and focus to return to the row", func() (bool, string) {
		p.mustEval(detailJS, &d)
		p.mustEval(`document.activeElement?.dataset?.key ?? document.activeElement?.id ?? ''`, &focused)
		return !d.Open && focused == key, fmt.Sprintf("open %v, focus on %q", d.Open, focused)
	})
	p.setValue("#quick", "")
}

// filterThroughTheForm fills in the filter form as a person would and
// checks each filtered table against the same query to the REST API: an
// index value with a label selector, then a namespace; a malformed selector
// is reported as the server's error; Clear brings every pod back.
func filterThroughTheForm(t *testing.T, p *page, api string) {
	t.Helper()
	apply := func(namespace, selector, index, value string) {
		p.mustEval(`(() => { const set = (id, v) => { const el = document.getElementById(id); el.value = v;
			el.dispatchEvent(new Event('change', {bubbles: true})); };
			set('f-namespace', `+jsString(namespace)+`); set('f-selector', `+jsString(selector)+`);
			set('f-index', `+jsString(index)+`); set('f-value', `+jsString(value)+`); })()`, nil)
		p.run("applying the filters", chromedp.Click(`#filters button[type="submit"]`, chromedp.ByQuery))
	}
	for _, f := range []struct{ namespace, selector, index, value string }{
		{"", "k8s-app=kube-proxy", "node", "node-1"},
		{"kube-system", "", "", ""},
	} {
		apply(f.namespace, f.selector, f.index, f.value)
		q := url.Values{}
		for k, v := range map[string]string{"namespace": f.namespace, "labelSelector": f.selector, "index": f.index, "value": f.value} {
			if v != "" {
				q.Set(k, v)
			}
		}
		p.waitFor(15*time.Second, "the table filtered by "+q.Encode(), func() (bool, string) {
			var list struct{ Items []json.RawMessage }
			getJSON(t, api+"/api/v1/pods?"+q.Encode(), &list)
			var hash string
			p.mustEval(`location.hash`, &hash)
			_, query, _ := strings.Cut(hash, "?")
			inHash, _ := url.ParseQuery(query)
			s := p.state()
			return inHash.Encode() == q.Encode() && s.Stream == "live" && s.Count == len(list.Items) && s.Count > 0,
				fmt.Sprintf("API: %d pods; hash %s; page %v", len(list.Items), hash, s)
		})
	}
	apply("", "app in (", "", "")
	p.waitFor(15*time.Second, "a malformed selector to be reported", func() (bool, string) {
		s := p.state()
		return s.Stream == "error" && s.Count == 0 && strings.Contains(s.StreamText, "labelSelector"), s.String()
	})
	p.run("clearing the filters", chromedp.Click("#f-clear", chromedp.ByQuery))
	tableMatchesAPI(t, p, api)
}

// resumeAfterCut drops every connection and waits for the page to say it
// resumed the stream, with the table again matching the API.
func resumeAfterCut(t *testing.T, p *page, px *proxy, api string) {
	t.Helper()
	px.cut()
	p.waitFor(30*time.Second, "the page to resume after the connection was cut", func() (bool, string) {
		s := p.state()
		return s.NoticeTone == "ok" && strings.Contains(s.Notice, "resumed"), s.String()
	})
	tableMatchesAPI(t, p, api)
	t.Logf("after the cut: %s", p.state().Notice)
}

// resyncAgainstNewServer points the proxy at a freshly started demo server
// and cuts the connection. Its stream is behind the position the page
// resumes from, so the server must refuse the resume (RESYNC_REQUIRED):
// the page reloads from a snapshot, says so, and matches the new server.
//
// The demo is deterministic: a fresh server goes through the same resource
// versions, so the old one must first run ahead by a margin of churn.
func resyncAgainstNewServer(t *testing.T, p *page, px *proxy, old *kubeindex, startRV uint64) {
	t.Helper()
	const margin = 25
	p.waitFor(60*time.Second, "the demo to churn ahead of a fresh server", func() (bool, string) {
		rv := podRV(t, old.URL)
		return rv >= startRV+2*margin, fmt.Sprintf("pods at %d, started at %d", rv, startRV)
	})
	fresh := startKubeindex(t, "--demo")
	if oldRV, newRV := podRV(t, old.URL), podRV(t, fresh.URL); oldRV < newRV+margin {
		t.Fatalf("setup: the first server (pods at %d) should be ahead of the fresh one (%d) by %d", oldRV, newRV, margin)
	}
	px.setBackend(fresh.Addr)
	px.cut()
	old.stop(t)
	p.waitFor(30*time.Second, "the page to say it resynced", func() (bool, string) {
		s := p.state()
		return s.NoticeTone == "warn" && strings.Contains(s.Notice, "resynced"), s.String()
	})
	tableMatchesAPI(t, p, fresh.URL)
	t.Logf("against the new server: %s", p.state().Notice)
}

// podRV is the resource version kubeindex reports for pods.
func podRV(t *testing.T, api string) uint64 {
	t.Helper()
	rv, err := strconv.ParseUint(podStatus(t, api).ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("pods resourceVersion: %v", err)
	}
	return rv
}
