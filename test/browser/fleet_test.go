package browser

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestDashboardFleet opens the dashboard on `kubeindex --demo
// --demo-clusters 3` and holds it to the fleet's API: the picker lists the
// clusters of /api/v1/clusters with their states; the view across
// clusters shows the rows, the total, the count chips per cluster and per
// status and each cluster's slot as the fleet root's list and counts
// answer them; a click on the Cluster header sorts as the server sorts by
// cluster; the IP lookup answers across clusters as the fleet's
// /api/v1/clusters/ip/{ip} does (an address held in two clusters shows
// both, each named; one held in none says so); a cluster's count chip
// filters by cluster; picking a cluster
// shows that cluster's own pods (its /clusters/{name}/api/v1/pods), live
// over its own stream; and a link naming a cluster opens it. The view
// across clusters stays live over exactly one WebSocket, the root's, with
// one subscription across clusters: a demo cluster's change arrives on it
// and the view shows the fleet's new answer.
func TestDashboardFleet(t *testing.T) {
	p := newPage(t)
	var ws sockets
	ws.listen(p)
	p.run("watching the WebSockets", network.Enable())
	ki := startKubeindex(t, "--demo", "--demo-clusters", "3")
	p.run("opening the dashboard", chromedp.Navigate(ki.URL+"/"))

	pickerListsClusters(t, p, ki.URL)
	p.waitFor(60*time.Second, "a plain link to open the view across clusters", func() (bool, string) {
		var hash string
		p.mustEval(`location.hash`, &hash)
		s := p.state()
		return hash == "#/clusters/*/pods" && s.Stream == "live", hash + " " + s.String()
	})
	fleetMatchesAPI(t, p, ki.URL, url.Values{})
	p.screenshot("dashboard-fleet")

	// One stream, at the root, follows every cluster; a change in a demo
	// cluster arrives on it, and the view asks the fleet again.
	root := "ws" + strings.TrimPrefix(ki.URL, "http") + "/api/v1/stream"
	p.waitFor(30*time.Second, "one WebSocket at the root with a change of a demo cluster", func() (bool, string) {
		open, subs, changed := ws.read()
		return slices.Equal(open, []string{root}) && len(subs) > 0 && changed > 0,
			fmt.Sprintf("open %q; subscribes %q; changes %d", open, subs, changed)
	})
	_, subs, _ := ws.read()
	for _, sub := range subs { // the first, and its resumptions after a disconnect
		if !strings.Contains(sub, `"resource":"pods"`) || strings.Contains(sub, `"cluster"`) ||
			!strings.Contains(sub, `"snapshot":false`) && !strings.Contains(sub, `"resourceVersion"`) {
			t.Fatalf("the view across clusters subscribed with %s; want pods, changes only, every cluster", sub)
		}
	}
	var asked string
	p.mustEval(`document.getElementById('stream-status').textContent`, &asked)
	p.waitFor(30*time.Second, "the view to ask again after a change", func() (bool, string) {
		var now string
		p.mustEval(`document.getElementById('stream-status').textContent`, &now)
		return now != asked, now
	})
	fleetMatchesAPI(t, p, ki.URL, url.Values{})
	if open, _, _ := ws.read(); !slices.Equal(open, []string{root}) {
		t.Fatalf("WebSockets open across clusters: %q; want only %s", open, root)
	}

	for _, click := range []string{"cluster", "-cluster"} {
		var c clickProbe
		p.mustEval(sortClickJS("Cluster"), &c)
		if c.MS < 0 {
			t.Fatalf("sorting by Cluster (%s): the rows never showed that order", click)
		}
		fleetMatchesAPI(t, p, ki.URL, url.Values{"sort": {click}})
	}

	// Enter on a row opens the whole object, read from its own cluster.
	var key string
	p.mustEval(`(() => { const r = [...document.querySelectorAll('.vt-body .vt-row')].find((r) => r.dataset.key);
		r.focus(); return r.dataset.key; })()`, &key)
	p.run("opening a row", chromedp.KeyEvent(kb.Enter))
	p.waitFor(30*time.Second, "the detail of "+key, func() (bool, string) {
		var d struct{ Title, JSON string }
		p.mustEval(`({title: document.getElementById('detail-title')?.textContent ?? '',
			json: document.querySelector('#detail .json')?.textContent ?? ''})`, &d)
		name := key[strings.LastIndex(key, "/")+1:]
		return d.Title == key && strings.Contains(d.JSON, `"`+name+`"`) && strings.Contains(d.JSON, "containers"), d.Title
	})
	p.run("closing the detail", chromedp.KeyEvent(kb.Escape))

	// The IP lookup asks every cluster: an address held in two (demo-1
	// and demo-3 overlap) shows both, each named with its owners; one
	// held nowhere says so.
	fleetIPLookup(t, p, ki.URL)

	// A cluster's count chip adds its filter; the rows and counts are the
	// server's for it.
	p.mustEval(`document.querySelector('#counts button[data-key="cluster"][data-value="demo-2"]').click()`, nil)
	p.waitFor(30*time.Second, "the chip cluster=\"demo-2\"", func() (bool, string) {
		c := chips(p)
		return fmt.Sprint(c) == `[cluster="demo-2"]`, fmt.Sprint(c)
	})
	fleetMatchesAPI(t, p, ki.URL, url.Values{"sort": {"-cluster"}, "filter": {`cluster="demo-2"`}})

	// Picking a cluster: its own pods, over its own stream.
	p.mustEval(`document.querySelector('#cluster-list a[data-cluster="demo-2"]').click()`, nil)
	clusterShown(t, p, ki.URL, "demo-2")
	p.screenshot("dashboard-fleet-cluster")

	// A link naming a cluster opens it.
	p.run("opening a link to demo-3", chromedp.Navigate(ki.URL+"/#/clusters/demo-3/pods"), chromedp.Reload())
	clusterShown(t, p, ki.URL, "demo-3")

	// So does the page as a cluster serves it.
	p.run("opening /clusters/demo-1/", chromedp.Navigate(ki.URL+"/clusters/demo-1/"))
	clusterShown(t, p, ki.URL, "demo-1")
	p.checkProblems()
}

// sockets follows the page's WebSockets: which are open, the subscribes
// sent (of watches, not windows) and how many changes of a cluster (an
// event naming its cluster) arrived.
type sockets struct {
	mu      sync.Mutex
	open    map[network.RequestID]string
	subs    []string
	changes int
}

func (w *sockets) listen(p *page) {
	w.open = map[network.RequestID]string{}
	chromedp.ListenTarget(p.ctx, func(ev any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventWebSocketCreated:
			w.open[ev.RequestID] = ev.URL
		case *network.EventWebSocketClosed:
			delete(w.open, ev.RequestID)
		case *network.EventWebSocketFrameSent:
			var m struct{ Op string }
			if json.Unmarshal([]byte(ev.Response.PayloadData), &m) == nil && m.Op == "subscribe" {
				w.subs = append(w.subs, ev.Response.PayloadData)
			}
		case *network.EventWebSocketFrameReceived:
			var m struct{ Cluster, Type string }
			if json.Unmarshal([]byte(ev.Response.PayloadData), &m) == nil && m.Cluster != "" &&
				(m.Type == "ADDED" || m.Type == "MODIFIED" || m.Type == "DELETED") {
				w.changes++
			}
		}
	})
}

// read is the open WebSockets' URLs, sorted, the subscribes sent and the
// changes received.
func (w *sockets) read() (open, subs []string, changes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, u := range w.open {
		open = append(open, u)
	}
	slices.Sort(open)
	return open, slices.Clone(w.subs), w.changes
}

// pickerListsClusters waits until the picker lists "all clusters" and
// then every cluster of /api/v1/clusters, in its order, with its state.
func pickerListsClusters(t *testing.T, p *page, api string) {
	t.Helper()
	p.waitFor(60*time.Second, "the picker to list the clusters", func() (bool, string) {
		var list struct {
			Clusters []struct{ Name, State string }
		}
		getJSON(t, api+"/api/v1/clusters", &list)
		want := []string{"*"}
		for _, c := range list.Clusters {
			want = append(want, c.Name+" "+c.State)
		}
		want[0] = "* "
		var shown []string
		p.mustEval(`(() => { `+visibleJS+` return shown(document.getElementById('clusters')) ?
			[...document.querySelectorAll('#cluster-list a')].map((a) => a.dataset.cluster + ' ' + (a.dataset.cluster === '*' ? '' : a.dataset.state)) : []; })()`, &shown)
		return len(list.Clusters) == 3 && slices.Equal(shown, want), fmt.Sprintf("shown %q; server %q", shown, want)
	})
}

// fleetMatchesAPI waits until the view across clusters shows what the
// fleet root answers q with (the demo churns, so both are read together
// until they agree): the first rows (cluster/namespace/name), the total,
// each cluster's slot, and the count chips per cluster and per status.
func fleetMatchesAPI(t *testing.T, p *page, api string, q url.Values) {
	t.Helper()
	p.waitFor(60*time.Second, fmt.Sprintf("the view across clusters to be the fleet's answer to %v", q), func() (bool, string) {
		var list struct {
			Metadata struct{ TotalItemCount int } `json:"metadata"`
			Clusters []struct {
				Cluster string
				Status  int
				Total   *int
			}
			Items []struct {
				Cluster string
				Object  struct {
					Metadata struct{ Namespace, Name string }
				}
			}
		}
		lq := url.Values{"limit": {"10"}, "fields": {"metadata.name"}}
		for k, v := range q {
			lq[k] = v
		}
		getJSON(t, api+"/api/v1/pods?"+lq.Encode(), &list)
		var want []string
		for _, it := range list.Items {
			want = append(want, it.Cluster+"/"+it.Object.Metadata.Namespace+"/"+it.Object.Metadata.Name)
		}
		var slots []string
		for _, c := range list.Clusters {
			total := ""
			if c.Total != nil {
				total = fmt.Sprint(*c.Total)
			}
			slots = append(slots, fmt.Sprintf("%s %d %s", c.Cluster, c.Status, total))
		}
		var counts struct {
			Groups []struct {
				Values []*string
				Count  int
			}
		}
		getJSON(t, api+"/api/v1/resources/pods/counts?"+url.Values{"groupBy": {"cluster,status"}, "filter": q["filter"]}.Encode(), &counts)
		perCluster, perStatus := map[string]int{}, map[string]int{}
		for _, g := range counts.Groups {
			if g.Values[0] != nil {
				perCluster[*g.Values[0]] += g.Count
			}
			if g.Values[1] != nil {
				perStatus[*g.Values[1]] += g.Count
			}
		}

		var shown struct {
			Keys       []string
			Slots      []string
			PerCluster map[string]int
			PerStatus  map[string]int
		}
		p.mustEval(`(() => {
			const chips = (key) => Object.fromEntries([...document.querySelectorAll('#counts button[data-key="' + key + '"]')]
				.map((b) => [b.dataset.value, +b.dataset.count]));
			return {
				keys: [...document.querySelectorAll('.vt-body .vt-row')].map((r) => [r.dataset.key, +r.getAttribute('aria-rowindex')])
					.filter(([k]) => k).sort((a, b) => a[1] - b[1]).slice(0, 10).map(([k]) => k),
				slots: [...document.querySelectorAll('#cluster-slots li')].map((li) => li.dataset.cluster + ' ' + li.dataset.status + ' ' + li.dataset.total),
				perCluster: chips('cluster'), perStatus: chips('status'),
			}; })()`, &shown)
		s := p.state()
		ok := s.Stream == "live" && s.Count == list.Metadata.TotalItemCount && slices.Equal(shown.Keys, want) &&
			slices.Equal(shown.Slots, slots) && fmt.Sprint(shown.PerCluster) == fmt.Sprint(perCluster) &&
			fmt.Sprint(shown.PerStatus) == fmt.Sprint(perStatus)
		return ok, fmt.Sprintf("shown %+v count %d (%s); server %v total %d slots %v per cluster %v per status %v",
			shown, s.Count, s.StreamText, want, list.Metadata.TotalItemCount, slots, perCluster, perStatus)
	})
}

// clusterShown waits until the page shows one cluster: the picker marks
// it, the URL names it, and the pods table is live over that cluster's
// own stream with that cluster's pods: its count, and rows that are all in
// the cluster's own list.
func clusterShown(t *testing.T, p *page, api, name string) {
	t.Helper()
	p.waitFor(60*time.Second, "the pods of "+name, func() (bool, string) {
		var list struct {
			Items []struct {
				Metadata struct{ Namespace, Name string }
			}
		}
		getJSON(t, api+"/clusters/"+name+"/api/v1/pods?fields=metadata.name", &list)
		own := map[string]bool{}
		for _, it := range list.Items {
			own[it.Metadata.Namespace+"/"+it.Metadata.Name] = true
		}
		var shown struct {
			Current string
			Hash    string
			Keys    []string
		}
		p.mustEval(`({current: document.querySelector('#cluster-list a[aria-current="page"]')?.dataset.cluster ?? '',
			hash: location.hash,
			keys: [...document.querySelectorAll('.vt-body .vt-row')].map((r) => r.dataset.key).filter(Boolean)})`, &shown)
		s := p.state()
		others := 0
		for _, k := range shown.Keys {
			if !own[k] {
				others++
			}
		}
		ok := shown.Current == name && shown.Hash == "#/clusters/"+name+"/pods" && s.Stream == "live" && s.Conn == "open" &&
			s.Count == len(list.Items) && len(shown.Keys) > 0 && others == 0
		return ok, fmt.Sprintf("%+v (%d not %s's); %s has %d pods; page %v", shown, others, name, name, len(list.Items), s)
	})
}

// TestDashboardFleetFailures opens the dashboard of a fleet of two: east,
// a kubeindex --demo read through its Kubernetes API (/k8s), and down,
// whose API server refuses connections. A cluster that does not answer is
// shown, never silently missing: the picker says down failed and why, the
// view across clusters has down's slot with the reason beside east's rows,
// picking down says it is not serving and why; and when east's API server
// stops, east is shown STALE in the picker and in its slot.
func TestDashboardFleetFailures(t *testing.T) {
	p := newPage(t)
	east := startKubeindex(t, "--demo")
	dir := t.TempDir()
	kubeconfig := func(name, server string) string {
		path := filepath.Join(dir, name+".yaml")
		cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q}\n"+
			"users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n", server)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ki := startKubeindex(t, "--cluster", "name=east,kubeconfig="+kubeconfig("east", east.URL+"/k8s"),
		"--cluster", "name=down,kubeconfig="+kubeconfig("down", "http://127.0.0.1:1"),
		"--fleet-ready", "any", "--stale-after", "2s")
	p.run("opening the dashboard", chromedp.Navigate(ki.URL+"/#/clusters/*/pods"))

	pickerShows(t, p, "down", "failed", "connection refused")
	fleetMatchesAPI(t, p, ki.URL, url.Values{})
	var slot struct{ Status, Text string }
	p.mustEval(`(() => { const li = document.querySelector('#cluster-slots li[data-cluster="down"]');
		return {status: li?.dataset.status ?? '', text: li?.textContent ?? ''}; })()`, &slot)
	if slot.Status != "503" || !strings.Contains(slot.Text, "connection refused") {
		t.Errorf("down's slot across clusters: %+v; want 503 with the reason", slot)
	}

	p.mustEval(`document.querySelector('#cluster-list a[data-cluster="down"]').click()`, nil)
	p.waitFor(30*time.Second, "the page to say down is not serving", func() (bool, string) {
		s := p.state()
		return strings.HasPrefix(s.Banner, "Cluster down is not serving") && strings.Contains(s.Banner, "connection refused"), s.String()
	})

	p.mustEval(`document.querySelector('#cluster-list a[data-cluster="*"]').click()`, nil)
	fleetMatchesAPI(t, p, ki.URL, url.Values{})
	east.stop(t)
	pickerShows(t, p, "east", "stale", "")
	p.waitFor(60*time.Second, "east's slot to say stale", func() (bool, string) {
		var state string
		p.mustEval(`document.querySelector('#cluster-slots li[data-cluster="east"]')?.dataset.state ?? ''`, &state)
		return state == "stale", state
	})
	p.screenshot("dashboard-fleet-failures")
	p.checkProblems()
}

// pickerShows waits until the picker shows cluster in state, with reason
// (when given) in its text.
func pickerShows(t *testing.T, p *page, cluster, state, reason string) {
	t.Helper()
	p.waitFor(60*time.Second, fmt.Sprintf("the picker to show %s %s", cluster, state), func() (bool, string) {
		var got struct{ State, Text string }
		p.mustEval(`(() => { const a = document.querySelector('#cluster-list a[data-cluster=`+jsString(cluster)+`]');
			return {state: a?.dataset.state ?? '', text: a?.textContent ?? ''}; })()`, &got)
		return got.State == state && strings.Contains(got.Text, reason), fmt.Sprintf("%+v", got)
	})
}

// fleetAnswer is the fleet's answer to who has an address.
type fleetAnswer struct {
	HeldIn   []string
	Clusters []struct {
		Cluster string
		Status  int
		Answer  apiAnswer
	}
}

func fleetIP(t *testing.T, api, ip string) fleetAnswer {
	t.Helper()
	var a fleetAnswer
	getJSON(t, api+"/api/v1/clusters/ip/"+url.PathEscape(ip), &a)
	return a
}

// fleetBox is what the IP box shows across clusters.
type fleetBox struct {
	Shown              bool
	Query, Match, Text string
	HeldIn             string
	Sections           []struct {
		Cluster, Title string
		Rows           []ipRow
	}
}

const fleetBoxJS = `(() => { ` + visibleJS + ` const r = document.getElementById('ip-result'); const d = r.dataset;
	return {shown: shown(r), query: d.query ?? '', match: d.match ?? '', heldIn: d.heldIn ?? '', text: r.textContent,
		sections: [...r.querySelectorAll('.ip-cluster')].map((s) => ({cluster: s.dataset.cluster, title: s.querySelector('h3')?.textContent ?? '',
			rows: [...s.querySelectorAll('tbody tr')].map((tr) => ({kind: tr.dataset.kind, key: tr.dataset.key, role: tr.dataset.role, uid: tr.dataset.uid}))}))}; })()`

// fleetIPLookup holds the IP box of the view across clusters to the
// fleet's answer: an address two clusters hold (a running pod's in both:
// the demo's odd clusters share a pod CIDR) shows both clusters, named,
// each with the owners its own answer lists, and says it is held in
// more than one; an address held nowhere says so; a port every cluster
// refuses is bad input, with their message.
func fleetIPLookup(t *testing.T, p *page, api string) {
	t.Helper()
	var shared string
	p.waitFor(60*time.Second, "an address held in two demo clusters", func() (bool, string) {
		var list struct {
			Items []struct {
				Cluster string
				Object  struct {
					Status struct{ Phase, PodIP string }
					Spec   struct{ HostNetwork bool }
				}
			}
		}
		getJSON(t, api+"/api/v1/pods?limit=1000&fields=status.podIP,status.phase,spec.hostNetwork", &list)
		in := map[string][]string{}
		for _, it := range list.Items {
			o := it.Object
			if o.Status.Phase == "Running" && o.Status.PodIP != "" && !o.Spec.HostNetwork {
				in[o.Status.PodIP] = append(in[o.Status.PodIP], it.Cluster)
			}
		}
		for _, ip := range slices.Sorted(maps.Keys(in)) {
			if len(in[ip]) >= 2 && len(fleetIP(t, api, ip).HeldIn) >= 2 {
				shared = ip
				return true, ip
			}
		}
		return false, fmt.Sprintf("%d addresses, none in two clusters", len(in))
	})
	p.ask(shared, ipAsk{})
	p.waitFor(30*time.Second, "the box to show every cluster holding "+shared, func() (bool, string) {
		want := fleetIP(t, api, shared)
		var got fleetBox
		p.mustEval(fleetBoxJS, &got)
		ok := got.Shown && got.Query == shared && got.Match == "several" && got.HeldIn == strings.Join(want.HeldIn, ",") &&
			!strings.Contains(got.Text, "null") && // nothing left out is written as text
			len(want.HeldIn) >= 2 && len(got.Sections) == len(want.HeldIn) &&
			strings.Contains(got.Text, fmt.Sprintf("Held in %d clusters: %s", len(want.HeldIn), strings.Join(want.HeldIn, ", ")))
		i := 0
		for _, c := range want.Clusters {
			if c.Status != 200 {
				continue
			}
			ok = ok && i < len(got.Sections) && got.Sections[i].Cluster == c.Cluster &&
				strings.Contains(got.Sections[i].Title, c.Cluster) && len(c.Answer.rows()) > 0 && sameRows(got.Sections[i].Rows, c.Answer.rows())
			i++
		}
		return ok, fmt.Sprintf("API: held in %v; box: %+v", want.HeldIn, got)
	})
	p.screenshot("dashboard-fleet-ip")

	const nowhere = "192.0.2.77" // TEST-NET-1: no demo cluster's
	if a := fleetIP(t, api, nowhere); len(a.HeldIn) != 0 {
		t.Fatalf("setup: %s is held in %v", nowhere, a.HeldIn)
	}
	p.ask(nowhere, ipAsk{})
	p.waitFor(30*time.Second, "the box to say nobody has "+nowhere, func() (bool, string) {
		var got fleetBox
		p.mustEval(fleetBoxJS, &got)
		return got.Shown && got.Query == nowhere && got.Match == "none" && len(got.Sections) == 0 &&
			strings.Contains(got.Text, "Nobody has "+nowhere+" in any cluster"), fmt.Sprintf("%+v", got)
	})

	// A port every cluster refuses is the box's bad input, with the
	// clusters' message.
	var refused fleetAnswer
	getJSON(t, api+"/api/v1/clusters/ip/"+nowhere+"?port=99999&protocol=TCP", &refused)
	if len(refused.Clusters) == 0 || refused.Clusters[0].Status != 400 || refused.Clusters[0].Answer.Message == "" {
		t.Fatalf("setup: port 99999 answered %+v; expect each cluster's 400", refused)
	}
	p.ask(nowhere, ipAsk{port: "99999", protocol: "TCP"})
	p.waitFor(30*time.Second, "the box to show the clusters' 400", func() (bool, string) {
		b := p.box()
		return b.Shown && b.Match == "error" && b.Code == "400" && strings.Contains(b.Text, refused.Clusters[0].Answer.Message), fmt.Sprintf("%+v", b)
	})
	p.run("closing the IP lookup", chromedp.KeyEvent(kb.Escape))
}
