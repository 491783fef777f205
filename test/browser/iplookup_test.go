package browser

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestDashboardWhoHasThisIP holds the dashboard's "Who has this IP?" box
// to kubeindex's own GET /api/v1/ip/{ip} on `kubeindex --demo`: for a pod
// address, a Service's ClusterIP and a node's address (its hostNetwork
// pods and the node), narrowed by a port one pod declares and by a port nobody declares,
// at a moment typed as a local time in a browser far from UTC, at a change
// of owner (boundary: both sides, in order), before the history (410),
// with bad input (400) and for a free address (404), the box shows what
// the API answers, every owner with its kind, namespace/name, role and
// UID, and data that looks like markup stays text.
func TestDashboardWhoHasThisIP(t *testing.T) {
	p := newPage(t)
	ki := startKubeindex(t, "--demo")
	// A zone far from UTC with a half-hour offset: a local time read as
	// UTC, or converted with a whole-hour guess, sends the wrong moment.
	p.run("setting the browser's time zone", emulation.SetTimezoneOverride("Asia/Kolkata"))
	p.run("opening the dashboard", chromedp.Navigate(ki.URL+"/#/pods"))
	p.waitFor(30*time.Second, "the dashboard to load", func() (bool, string) {
		s := p.state()
		return s.Stream == "live", s.String()
	})
	demo := readDemo(t, ki.URL)

	// Kinds: a pod, a Service, a node with its hostNetwork pods.
	p.lookUpLikeAPI(t, ki.URL, demo.podIP, ipAsk{}, "pod", "Pod")
	p.lookUpLikeAPI(t, ki.URL, demo.clusterIP, ipAsk{}, "service", "Service")
	p.lookUpLikeAPI(t, ki.URL, demo.nodeIP, ipAsk{}, "hostNetwork", "Pod", "Node")

	// Ports: the hostNetwork pod that declares 9100 (node-exporter; both
	// daemons declare 2020 and 9090), and a port none declares, which
	// narrows nothing.
	got := p.lookUpLikeAPI(t, ki.URL, demo.nodeIP, ipAsk{port: "9100", protocol: "TCP"}, "pod")
	if got.Via != "port" || len(got.Rows) == 0 || got.Rows[0].Kind != "Pod" {
		t.Errorf("port 9100 on %s: the box says via %q, owners %v; the API picked the pod via port", demo.nodeIP, got.Via, got.Rows)
	}
	got = p.lookUpLikeAPI(t, ki.URL, demo.nodeIP, ipAsk{port: "4", protocol: "UDP"}, "hostNetwork", "Pod", "Node")
	if got.Declared != "false" {
		t.Errorf("port 4/UDP on %s: the box does not say that no holder declares it: %+v", demo.nodeIP, got)
	}

	// At a moment, typed as this browser's local time: the box sends it in
	// UTC, and shows the history's answer (owners, certainty).
	// The moment is 3 s ago, so first wait until the history reaches that
	// far back (it starts with the process).
	p.waitFor(30*time.Second, "the IP history to reach 3 s back", func() (bool, string) {
		since := time.Now().Add(-3 * time.Second).UTC().Format(time.RFC3339Nano)
		code, body := apiIP(t, ki.URL, demo.podIP, url.Values{"at": {since}})
		return code != http.StatusGone, string(body)
	})
	at := time.Now().Add(-3 * time.Second).Truncate(time.Millisecond)
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	typed := at.In(kolkata).Format("2006-01-02 15:04:05.000")
	demo = readDemo(t, ki.URL) // a pod that has its address now (the demo churns)
	got = p.lookUpLikeAPI(t, ki.URL, demo.podIP, ipAsk{at: typed, sent: at.UTC().Format("2006-01-02T15:04:05.000Z07:00")}, "pod", "Pod")
	if got.At != at.UTC().Format(time.RFC3339Nano) || got.Certainty == "" {
		t.Errorf("at %s typed in Asia/Kolkata: the box answers at %q, certainty %q; expect at %s",
			typed, got.At, got.Certainty, at.UTC().Format(time.RFC3339Nano))
	}

	// At a change of owner: boundary, both sides, ordered as the API
	// orders them.
	change, changeAt := waitForObservedChange(t, p, ki.URL)
	got = p.lookUpLikeAPI(t, ki.URL, change, ipAsk{at: changeAt}, "")
	if got.Certainty != "boundary" {
		t.Errorf("at %s, when %s changed owner: certainty %q; expect boundary", changeAt, change, got.Certainty)
	}
	for i, r := range got.Rows {
		if r.Order != fmt.Sprint(i+1) {
			t.Errorf("boundary owners out of order: row %d is numbered %q", i, r.Order)
		}
	}

	// Errors, each as the API words it.
	p.lookUpError(t, ki.URL, demo.podIP, ipAsk{at: "2001-01-01T00:00:00Z"}, 410, "beforeHistory")
	p.lookUpError(t, ki.URL, demo.podIP, ipAsk{at: "yesterday"}, 400, "error")
	p.lookUpError(t, ki.URL, demo.podIP, ipAsk{port: "99999", protocol: "TCP"}, 400, "error")
	p.lookUpError(t, ki.URL, "203.0.113.254", ipAsk{}, 404, "none")
	// The server repeats bad input in its message: it must stay text.
	p.lookUpError(t, ki.URL, `<img src=x onerror="document.title='pwned'">`, ipAsk{}, 400, "error")
	p.screenshot("dashboard-ip-lookup")
	p.checkProblems()
}

// demoAddresses are addresses of each kind the demo holds.
type demoAddresses struct {
	podIP, clusterIP, nodeIP string
}

func readDemo(t *testing.T, api string) demoAddresses {
	t.Helper()
	var d demoAddresses
	var pods struct {
		Items []struct {
			Spec   struct{ HostNetwork bool }            `json:"spec"`
			Status struct{ Phase, PodIP, HostIP string } `json:"status"`
		} `json:"items"`
	}
	getJSON(t, api+"/api/v1/pods", &pods)
	for _, it := range pods.Items {
		switch {
		case it.Spec.HostNetwork && it.Status.PodIP != "" && d.nodeIP == "":
			d.nodeIP = it.Status.PodIP
		case !it.Spec.HostNetwork && it.Status.Phase == "Running" && it.Status.PodIP != "" && d.podIP == "":
			d.podIP = it.Status.PodIP
		}
	}
	var svcs struct {
		Items []struct {
			Spec struct{ ClusterIP string } `json:"spec"`
		} `json:"items"`
	}
	getJSON(t, api+"/api/v1/services", &svcs)
	for _, it := range svcs.Items {
		if it.Spec.ClusterIP != "" && it.Spec.ClusterIP != "None" {
			d.clusterIP = it.Spec.ClusterIP
			break
		}
	}
	if d.podIP == "" || d.clusterIP == "" || d.nodeIP == "" {
		t.Fatalf("the demo lacks an address of some kind: %+v", d)
	}
	return d
}

// ipAsk is what is typed into the box besides the address. sent is the
// at the box must send for it, when not as typed.
type ipAsk struct {
	port, protocol, at, sent string
}

func (a ipAsk) query() url.Values {
	q := url.Values{}
	if a.port != "" {
		q.Set("port", a.port)
		q.Set("protocol", a.protocol)
	}
	switch {
	case a.sent != "":
		q.Set("at", a.sent)
	case a.at != "":
		q.Set("at", a.at)
	}
	return q
}

// ipRow is one owner as the box shows it, or as the API lists it.
type ipRow struct {
	Kind, Key, Role, UID string
	Order                string `json:"order"`
}

func (r ipRow) String() string { return r.Kind + " " + r.Key + " " + r.Role + " " + r.UID }

// ipBox is what the box shows, read from the DOM in one go.
type ipBox struct {
	Shown                                        bool
	Query, Match, Certainty, Via, At, Code, Text string
	Declared                                     string
	Rows                                         []ipRow
	Markup                                       int
}

const ipBoxJS = `(() => { ` + visibleJS + ` const r = document.getElementById('ip-result'); const d = r.dataset;
	return {shown: shown(r), query: d.query ?? '', match: d.match ?? '', certainty: d.certainty ?? '', via: d.via ?? '',
		at: d.at ?? '', code: d.code ?? '', text: r.textContent,
		declared: r.querySelector('.ip-note[data-declared]')?.dataset.declared ?? '',
		rows: [...r.querySelectorAll('tbody tr')].map((tr) => ({kind: tr.dataset.kind, key: tr.dataset.key,
			role: tr.dataset.role, uid: tr.dataset.uid, order: tr.dataset.order ?? '',
			// what a person reads in the row: the owner's name and UID
			text: tr.textContent})),
		markup: r.querySelectorAll('img, script, iframe').length}; })()`

// ask types ip and a into the form and submits it with the button.
func (p *page) ask(ip string, a ipAsk) {
	p.t.Helper()
	p.setValue("#ip-input", ip)
	p.setValue("#ip-port", a.port)
	if a.protocol != "" {
		p.setValue("#ip-protocol", a.protocol)
	}
	p.setValue("#ip-at", a.at)
	p.run("submitting the IP lookup of "+ip, chromedp.Click(`#ip-form button[type="submit"]`, chromedp.ByQuery))
}

func (p *page) box() ipBox {
	p.t.Helper()
	var b ipBox
	p.mustEval(ipBoxJS, &b)
	return b
}

// apiIP asks kubeindex the box's question.
func apiIP(t *testing.T, api, ip string, q url.Values) (int, []byte) {
	t.Helper()
	target := api + "/api/v1/ip/" + url.PathEscape(ip)
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	res, err := http.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// apiAnswer is the part of an IP answer (now or at a moment) the box shows.
type apiAnswer struct {
	Match, Via, Certainty, At string
	Pods                      []struct{ Namespace, Name, UID string }
	Services                  []struct{ Namespace, Name, UID, Role string }
	Nodes                     []struct{ Name, UID, Role string }
	Owners                    []struct{ Kind, Namespace, Name, UID, Role string }
	Port                      *struct{ Declared bool }
	Message                   string
}

// rows lists the owners as the box must: pods, Services, nodes; or the
// history's owners in their order.
func (a apiAnswer) rows() []ipRow {
	var out []ipRow
	for _, p := range a.Pods {
		out = append(out, ipRow{Kind: "Pod", Key: p.Namespace + "/" + p.Name, Role: "podIP", UID: p.UID})
	}
	for _, s := range a.Services {
		out = append(out, ipRow{Kind: "Service", Key: s.Namespace + "/" + s.Name, Role: s.Role, UID: s.UID})
	}
	for _, n := range a.Nodes {
		out = append(out, ipRow{Kind: "Node", Key: n.Name, Role: n.Role, UID: n.UID})
	}
	for _, o := range a.Owners {
		key := o.Name
		if o.Namespace != "" {
			key = o.Namespace + "/" + o.Name
		}
		out = append(out, ipRow{Kind: o.Kind, Key: key, Role: o.Role, UID: o.UID})
	}
	return out
}

func rowsString(rows []ipRow) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.String())
	}
	return strings.Join(s, "; ")
}

// lookUpLikeAPI asks the box and waits until it shows what the API
// answers to the same question (read again on every poll: the demo
// churns), with the match expected and owners of the kinds expected (in
// that order of first appearance; none given: any).
func (p *page) lookUpLikeAPI(t *testing.T, api, ip string, a ipAsk, match string, kinds ...string) ipBox {
	t.Helper()
	p.ask(ip, a)
	q := a.query()
	wantQuery := ip
	if len(q) > 0 {
		wantQuery += "?" + q.Encode()
	}
	var got ipBox
	p.waitFor(30*time.Second, fmt.Sprintf("the box to answer %s as the API does", wantQuery), func() (bool, string) {
		code, body := apiIP(t, api, ip, q)
		if code != http.StatusOK {
			t.Fatalf("setup: the API answers %s with %d %s", wantQuery, code, body)
		}
		var want apiAnswer
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatal(err)
		}
		if match != "" && want.Match != match {
			t.Fatalf("setup: the API answers %s with match %q; expect %q: %s", wantQuery, want.Match, match, body)
		}
		var seen []string
		for _, r := range want.rows() {
			if !slices.Contains(seen, r.Kind) {
				seen = append(seen, r.Kind)
			}
		}
		if len(kinds) > 0 && !slices.Equal(seen, kinds) {
			t.Fatalf("setup: the API answers %s with owners of kinds %v; expect %v: %s", wantQuery, seen, kinds, body)
		}
		got = p.box()
		ok := got.Shown && got.Query == wantQuery && got.Match == want.Match && got.Via == want.Via && !strings.Contains(got.Text, "null") &&
			got.Certainty == want.Certainty && got.At == want.At && sameRows(got.Rows, want.rows()) &&
			(want.Port == nil || got.Declared == fmt.Sprint(want.Port.Declared))
		return ok, fmt.Sprintf("API: match %s via %q certainty %q at %q owners [%s]; box: %+v",
			want.Match, want.Via, want.Certainty, want.At, rowsString(want.rows()), got)
	})
	return got
}

// sameRows compares the owners the box lists with the API's, in order,
// and checks that each row shows its name and UID to a reader.
func sameRows(got, want []ipRow) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g := got[i]
		if g.Kind != want[i].Kind || g.Key != want[i].Key || g.Role != want[i].Role || g.UID != want[i].UID {
			return false
		}
	}
	return true
}

// lookUpError asks the box a question the API refuses with code, and
// waits until the box shows the refusal as match kind (the API's message
// included, except for a 404, said in the box's words).
func (p *page) lookUpError(t *testing.T, api, ip string, a ipAsk, code int, match string) {
	t.Helper()
	q := a.query()
	gotCode, body := apiIP(t, api, ip, q)
	var want apiAnswer
	if err := json.Unmarshal(body, &want); err != nil || gotCode != code {
		t.Fatalf("setup: the API answers %s %v with %d %s; expect %d", ip, q, gotCode, body, code)
	}
	p.ask(ip, a)
	wantQuery := ip
	if len(q) > 0 {
		wantQuery += "?" + q.Encode()
	}
	var got ipBox
	p.waitFor(30*time.Second, fmt.Sprintf("the box to show the %d of %s", code, wantQuery), func() (bool, string) {
		got = p.box()
		return got.Shown && got.Query == wantQuery && got.Match == match && got.Code == fmt.Sprint(code), fmt.Sprintf("%+v", got)
	})
	if code != http.StatusNotFound && !strings.Contains(got.Text, want.Message) {
		t.Errorf("%s: the box does not show the API's message %q: %q", wantQuery, want.Message, got.Text)
	}
	if len(got.Rows) != 0 || got.Markup != 0 {
		t.Errorf("%s: the box shows %d owner rows and %d elements made from the answer", wantQuery, len(got.Rows), got.Markup)
	}
	var title string
	p.mustEval(`document.title`, &title)
	if strings.Contains(title, "pwned") {
		t.Errorf("the lookup ran script from its input: title %q", title)
	}
}

// waitForObservedChange finds an address whose owner kubeindex saw take
// it (not present at start-up, so the moment is an observed change) and
// returns it with that moment, as the API's history has it.
func waitForObservedChange(t *testing.T, p *page, api string) (string, string) {
	t.Helper()
	var ip, from string
	p.waitFor(90*time.Second, "the demo to give a pod an address while kubeindex watches", func() (bool, string) {
		var pods struct {
			Items []struct {
				Spec   struct{ HostNetwork bool } `json:"spec"`
				Status struct{ PodIP string }     `json:"status"`
			} `json:"items"`
		}
		getJSON(t, api+"/api/v1/pods", &pods)
		now := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
		for _, it := range pods.Items {
			if it.Spec.HostNetwork || it.Status.PodIP == "" {
				continue
			}
			code, body := apiIP(t, api, it.Status.PodIP, url.Values{"at": {now}})
			var a struct {
				Owners []struct{ From, Since string }
			}
			if code != http.StatusOK || json.Unmarshal(body, &a) != nil {
				continue
			}
			for _, o := range a.Owners {
				if o.Since == "" {
					ip, from = it.Status.PodIP, o.From
					return true, ""
				}
			}
		}
		return false, "every pod address was held since start-up"
	})
	return ip, from
}
