package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"
)

// TestHeadersOfEveryAnswer sends requests to the real server and reads the
// answers as a client does: the freshness and security headers are on
// successes and errors alike, set before the status was written, and the
// body arrives whole, whatever its framing.
func TestHeadersOfEveryAnswer(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	_, addr := serveReal(t, f.Cache, Options{})
	pod := podOnThePodNetwork(t, f.Cache)
	podIP := gjson.GetBytes(pod.Raw(), "status.podIP").Str
	tests := []struct {
		method, target string
		code           int
		// about names the resource whose freshness the answer carries; ""
		// for the whole cache's, which has no resource version.
		about string
	}{
		{"GET", "/api/v1/pods/" + pod.Key(), 200, "pods"},
		{"GET", "/api/v1/nodes/node-2", 200, "nodes"},
		{"GET", "/api/v1/ip/" + podIP, 200, "pods"},
		{"GET", "/api/v1/ip/10.0.0.12", 200, "pods"},
		{"GET", "/api/v1/pods?namespace=kube-system", 200, "pods"},
		{"GET", "/api/v1/pods?namespace=kube-system&limit=1", 200, "pods"},
		{"GET", "/api/v1/resources/pods", 200, "pods"},
		{"GET", "/api/v1/resources/pods/indexes/node", 200, "pods"},
		{"GET", "/api/v1/resources", 200, ""},
		{"GET", "/healthz", 200, ""},
		{"GET", "/readyz", 200, ""},
		{"GET", "/metrics", 200, ""},
		{"GET", "/openapi.json", 200, ""},
		{"GET", "/api/v1/pods/kube-system/nope", 404, "pods"},
		{"GET", "/api/v1/ip/10.255.0.1", 404, "pods"},
		{"GET", "/api/v1/pods/" + pod.Key() + "?pretty=1", 400, ""}, // refused before the resource is read
		{"GET", "/api/v1/ip/not-an-ip", 400, "pods"},
		{"GET", "/api/v1/widgets", 404, ""}, // no such resource: the whole cache's
		{"GET", "/api/v1/widgets/ns/name", 404, ""},
		{"GET", "/api/v1/resources/widgets/indexes/node", 404, ""},
		{"GET", "/no/such/route", 404, ""},
		{"DELETE", "/api/v1/pods", 405, ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, "http://"+addr+tt.target, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		name := tt.method + " " + tt.target
		switch {
		case err != nil:
			t.Errorf("%s: reading the body: %v", name, err)
		case resp.StatusCode != tt.code:
			t.Errorf("%s: %d; expect %d", name, resp.StatusCode, tt.code)
		case resp.ContentLength >= 0 && resp.ContentLength != int64(len(body)):
			t.Errorf("%s: Content-Length %d, body %d bytes", name, resp.ContentLength, len(body))
		case tt.target != "/metrics" && !json.Valid(body):
			t.Errorf("%s: body is not JSON: %.200q", name, body)
		}
		h := resp.Header
		for k, v := range map[string]string{
			"X-Content-Type-Options": "nosniff", "Cross-Origin-Resource-Policy": "same-origin",
			"Content-Security-Policy": "", HeaderSynced: "true", HeaderWatch: "connected", HeaderStale: "false",
		} {
			if got := h.Get(k); got != v {
				t.Errorf("%s: %s %q; expect %q", name, k, got, v)
			}
		}
		if h.Get(HeaderLastEvent) == "" {
			t.Errorf("%s: no %s", name, HeaderLastEvent)
		}
		wantRV := ""
		if tt.about != "" {
			st, _ := f.Cache.ResourceStatus(tt.about)
			wantRV = st.ResourceVersion
		}
		if got := h.Get(HeaderResourceVersion); got != wantRV {
			t.Errorf("%s: %s %q; expect %q (the freshness of %q)", name, HeaderResourceVersion, got, wantRV, tt.about)
		}
		if ct := h.Get("Content-Type"); tt.target != "/metrics" && ct != "application/json" {
			t.Errorf("%s: Content-Type %q", name, ct)
		}
		if tt.target == "/api/v1/pods/"+pod.Key() && string(body) != string(pod.Raw()) {
			t.Errorf("%s: the body is not the stored object", name)
		}
	}
}

// TestSharedHeaderValuesStay proves that the header values every answer
// shares are never changed through one answer: a caller appending to a
// header of its response does not reach the next response.
func TestSharedHeaderValuesStay(t *testing.T) {
	_, h := startServer(t)
	target := "/api/v1/pods/kube-system/kube-proxy-zhstf"
	first := do(t, h, "GET", target)
	want := first.Header().Clone()
	for k := range first.Header() {
		first.Header().Add(k, "changed")
	}
	second := do(t, h, "GET", target)
	for k, v := range want {
		if got := second.Header()[k]; strings.Join(got, "|") != strings.Join(v, "|") {
			t.Errorf("%s %q after an append to the previous answer's; expect %q", k, got, v)
		}
	}
}

// TestMetricsByRoute checks that requests are counted under their route
// pattern with their code, refusals and recovered panics included.
func TestMetricsByRoute(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	h := New(panicky{f.Cache}, Options{Logger: quiet()}).Handler()
	for _, target := range []string{
		"/api/v1/pods/kube-system/kube-proxy-zhstf", "/api/v1/pods/kube-system/kube-proxy-zhstf",
		"/api/v1/pods/kube-system/nope", "/api/v1/pods/kube-system/kube-proxy-zhstf?x=1",
		"/api/v1/ip/10.0.0.12", // panicky: a recovered panic, a 500
		"/no/such/route",
	} {
		do(t, h, "GET", target)
	}
	metrics := do(t, h, "GET", "/metrics").Body.String()
	get := `route="/api/v1/:resource/:namespace/:name"`
	for _, want := range []string{
		`kubeindex_http_requests_total{code="200",method="GET",` + get + `} 2`,
		`kubeindex_http_requests_total{code="404",method="GET",` + get + `} 1`,
		`kubeindex_http_requests_total{code="400",method="GET",` + get + `} 1`,
		`kubeindex_http_requests_total{code="500",method="GET",route="/api/v1/ip/:ip"} 1`,
		`kubeindex_http_request_duration_seconds_count{` + get + `} 4`,
		`kubeindex_http_request_duration_seconds_count{route="/api/v1/ip/:ip"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(metrics, `code="404",method="GET",route="`) || strings.Contains(metrics, `route="/no/such/route"`) {
		t.Error("an unmatched path must be counted under a route pattern, never under its own path")
	}
	if strings.Contains(metrics, `route="/healthz"`) {
		t.Error("a route never asked for has series")
	}
	// What a harness waits for before it reads a settled heap.
	for _, want := range []string{`kubeindex_ordered_indexes{kind="asked",resource="pods"} `,
		`kubeindex_ordered_indexes{kind="standing",resource="pods"} `, `kubeindex_standing_indexes_pending{resource="pods"} `} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The members of the owners of a lookup of now, as encoding/json encoded
// the types they once were: the wire format the hand-written encoders
// (ipowner/encode.go) keep.
type (
	wirePod struct {
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		UID         string `json:"uid"`
		Phase       string `json:"phase"`
		NodeName    string `json:"nodeName,omitempty"`
		HostNetwork bool   `json:"hostNetwork"`
		Active      bool   `json:"active"`
	}
	wireService struct {
		Namespace string       `json:"namespace"`
		Name      string       `json:"name"`
		UID       string       `json:"uid"`
		Role      ipowner.Role `json:"role"`
	}
	wireNode struct {
		Name string       `json:"name"`
		UID  string       `json:"uid"`
		Role ipowner.Role `json:"role"`
	}
)

func wireOwners(res cache.IPLookup) (pods []wirePod, services []wireService, nodes []wireNode) {
	pods = []wirePod{} // never null: only Services or Nodes may hold the address
	for _, p := range res.Pods {
		pods = append(pods, wirePod{p.Namespace, p.Name, p.UID, p.Phase, p.NodeName, p.HostNetwork, p.Active()})
	}
	for _, s := range res.Services {
		services = append(services, wireService{s.Namespace, s.Name, s.UID, s.Role})
	}
	for _, n := range res.Nodes {
		nodes = append(nodes, wireNode{n.Name, n.UID, n.Role})
	}
	return pods, services, nodes
}

// TestIPLookupEncoding pins the hand-written encoding of IP lookups to what
// encoding/json makes of the same values.
func TestIPLookupEncoding(t *testing.T) {
	pod, err := cache.NewObject([]byte(`{"metadata":{"name":"web-0","namespace":"shop"}}`), "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	plain := ipowner.Owner{Kind: ipowner.Pod, Namespace: "shop", Name: "web-0", UID: "0c0a9a4e-6d5c-4e0e-9d7b-1a2b3c4d5e6f",
		Phase: "Running", NodeName: "node-1"}
	lookup := func(a ipowner.Answer[*cache.Object], rv string) cache.IPLookup {
		return cache.IPLookup{Answer: a, Freshness: cache.Freshness{ResourceVersion: rv}}
	}
	tests := []struct {
		name string
		res  cache.IPLookup
	}{
		{"one pod", lookup(ipowner.Answer[*cache.Object]{IP: "10.244.1.7", Match: ipowner.MatchPod, Pods: []ipowner.Owner{plain},
			Items: []*cache.Object{pod}}, "4711")},
		{"two pods, no node", lookup(ipowner.Answer[*cache.Object]{IP: "fd00::7", Match: ipowner.MatchHostNetwork,
			Pods:  []ipowner.Owner{plain, {Kind: ipowner.Pod, Namespace: "kube-system", Name: "proxy", HostNetwork: true, Phase: "Succeeded"}},
			Items: []*cache.Object{pod, pod}}, "")},
		{"nothing", lookup(ipowner.Answer[*cache.Object]{IP: "10.0.0.1"}, "")},
		{"a service and a node by port", lookup(ipowner.Answer[*cache.Object]{IP: "10.0.0.2", Match: ipowner.MatchService, Via: "port",
			Port:     &ipowner.PortAnswer{Number: 443, Protocol: "TCP", Declared: true},
			Services: []ipowner.Owner{{Kind: ipowner.Service, Namespace: "edge", Name: "tls", UID: "u1", Role: "externalIP"}}, ServiceItems: []*cache.Object{pod},
			Nodes: []ipowner.Owner{{Kind: ipowner.Node, Name: "n<1>", UID: "u2", Role: "nodeInternal"}}, NodeItems: []*cache.Object{pod}}, "")},
		{"characters to escape", lookup(ipowner.Answer[*cache.Object]{IP: `<a href="x">&</a>`, Match: "\u2028\u2029",
			Pods: []ipowner.Owner{{Kind: ipowner.Pod, Namespace: "tab\there", Name: "quote\"back\\slash", UID: "\x00\x1f\x7f",
				Phase: "héllo wörld", NodeName: "bad \xff utf-8"}}}, "\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkIPLookupEncoding(t, tt.res)
		})
	}
}

func FuzzIPLookupEncoding(f *testing.F) {
	f.Add("10.0.0.1", "pod", "12", "ns", "name", "uid", "Running", "node", true, false)
	f.Add("<>&", "\u2028", "\"\\", "\x00", "\xff\xfe", "é", "\t\n", "", false, true)
	f.Fuzz(func(t *testing.T, ip, match, rv, ns, name, uid, phase, node string, host, _ bool) {
		checkIPLookupEncoding(t, cache.IPLookup{Answer: ipowner.Answer[*cache.Object]{IP: ip, Match: ipowner.Match(match),
			Pods: []ipowner.Owner{{Kind: ipowner.Pod, Namespace: ns, Name: name, UID: uid, Phase: phase, NodeName: node,
				HostNetwork: host}}}, Freshness: cache.Freshness{ResourceVersion: rv}})
	})
}

// checkIPLookupEncoding compares writeIPLookup with the reflective
// encoding it replaced.
func checkIPLookupEncoding(t *testing.T, res cache.IPLookup) {
	t.Helper()
	pods, services, nodes := wireOwners(res)
	head, err := json.Marshal(struct {
		Kind       string              `json:"kind"`
		APIVersion string              `json:"apiVersion"`
		IP         string              `json:"ip"`
		Match      ipowner.Match       `json:"match"`
		Via        string              `json:"via,omitempty"`
		Port       *ipowner.PortAnswer `json:"port,omitempty"`
		Metadata   ListMeta            `json:"metadata"`
		Pods       []wirePod           `json:"pods"`
		Services   []wireService       `json:"services,omitempty"`
		Nodes      []wireNode          `json:"nodes,omitempty"`
	}{"PodIPLookup", "kubeindex/v1", res.IP, res.Match, res.Via, res.Port,
		ListMeta{ResourceVersion: res.Freshness.ResourceVersion}, pods, services, nodes})
	if err != nil {
		t.Fatal(err)
	}
	want := append(head[:len(head)-1], `,"items":[`...)
	items := append(append(append([]*cache.Object(nil), res.Items...), res.ServiceItems...), res.NodeItems...)
	for i, o := range items {
		if i > 0 {
			want = append(want, ',')
		}
		want = append(want, o.Raw()...)
	}
	want = append(want, "]}\n"...)
	rec := httptest.NewRecorder()
	if err := writeIPLookup(rec, nil, res); err != nil {
		t.Fatal(err)
	}
	if got := rec.Body.String(); got != string(want) {
		t.Errorf("encoded\n%s\nencoding/json\n%s", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

// podOnThePodNetwork is a running pod with an address of its own.
func podOnThePodNetwork(t testing.TB, c *cache.Cache) *cache.Object {
	t.Helper()
	res, err := c.List("pods", cache.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Items {
		p := gjson.ParseBytes(o.Raw())
		if p.Get("status.phase").Str == "Running" && !p.Get("spec.hostNetwork").Bool() && p.Get("status.podIP").Str != "" {
			return o
		}
	}
	t.Fatal("the demo has no running pod on the pod network")
	return nil
}

// TestContentLengthValues checks the shared Content-Length values: the
// right number whatever was asked before in the same slot, the same value
// again for a repeated length, and no room to append into.
func TestContentLengthValues(t *testing.T) {
	slots := len(lengthValues)
	for _, n := range []int{0, 1, 6312, 6312 + slots, 6312, slots - 1, slots, 2 * slots, 1 << 40} {
		got := contentLength(n)
		if len(got) != 1 || got[0] != strconv.Itoa(n) {
			t.Fatalf("contentLength(%d) = %q", n, got)
		}
		if cap(got) != 1 {
			t.Fatalf("contentLength(%d) has capacity %d: an append would reach the next answer", n, cap(got))
		}
		if again := contentLength(n); &again[0] != &got[0] {
			t.Errorf("contentLength(%d) twice: two values, want one shared", n)
		}
	}
}
