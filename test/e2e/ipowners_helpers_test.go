package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The oracle of the IP owner tests: who holds an address, read from the API
// server's pods, Services and nodes, with the roles, match and port rules
// of docs/ip.md; and kubeindex's answers, read into the same shape.

// ownersAnswer is kubeindex's answer to GET /api/v1/ip/{ip} (of now).
type ownersAnswer struct {
	Kind  string      `json:"kind"`
	IP    string      `json:"ip"`
	Match string      `json:"match"`
	Via   string      `json:"via"`
	Port  *portAnswer `json:"port"`
	Pods  []struct {
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		UID         string `json:"uid"`
		Phase       string `json:"phase"`
		HostNetwork bool   `json:"hostNetwork"`
		Active      bool   `json:"active"`
	} `json:"pods"`
	Services []struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		UID       string `json:"uid"`
		Role      string `json:"role"`
	} `json:"services"`
	Nodes []struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
		Role string `json:"role"`
	} `json:"nodes"`
	Items []json.RawMessage `json:"items"`
}

type portAnswer struct {
	Number   int32  `json:"number"`
	Protocol string `json:"protocol"`
	Declared bool   `json:"declared"`
}

// ownersView is an answer of now reduced to what the oracle can say: every
// holder with its UID and role, in the answer's order.
type ownersView struct {
	Match, Via string
	Port       *portAnswer
	Pods       []string // "ns/name uid active|finished pod|hostNetwork"
	Services   []string // "ns/name uid role"
	Nodes      []string // "name uid role"
}

func (a ownersAnswer) view() ownersView {
	v := ownersView{Match: a.Match, Via: a.Via, Port: a.Port}
	for _, p := range a.Pods {
		v.Pods = append(v.Pods, podLine(p.Namespace, p.Name, p.UID, p.Active, p.HostNetwork))
	}
	for _, s := range a.Services {
		v.Services = append(v.Services, s.Namespace+"/"+s.Name+" "+s.UID+" "+s.Role)
	}
	for _, n := range a.Nodes {
		v.Nodes = append(v.Nodes, n.Name+" "+n.UID+" "+n.Role)
	}
	return v
}

func podLine(ns, name, uid string, active, hostNetwork bool) string {
	s := ns + "/" + name + " " + uid
	if active {
		s += " active"
	} else {
		s += " finished"
	}
	if hostNetwork {
		return s + " hostNetwork"
	}
	return s + " pod"
}

// sameAddr compares addresses whatever their spelling.
func sameAddr(a, b string) bool {
	x, err1 := netip.ParseAddr(a)
	y, err2 := netip.ParseAddr(b)
	return err1 == nil && err2 == nil && x.Unmap() == y.Unmap()
}

// heldByAPIServer is who holds ip according to the API server: pods
// (status.podIPs), Services (spec.clusterIPs but "None", spec.externalIPs,
// status.loadBalancer.ingress[].ip) and nodes (InternalIP, ExternalIP).
type heldByAPIServer struct {
	pods     []corev1.Pod
	services []corev1.Service
	svcRoles []string
	nodes    []corev1.Node
	nodeRole []string
}

func apiServerHolders(ctx context.Context, cs kubernetes.Interface, ip string) (heldByAPIServer, error) {
	var h heldByAPIServer
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return h, err
	}
	for _, p := range pods.Items {
		if slices.ContainsFunc(p.Status.PodIPs, func(a corev1.PodIP) bool { return sameAddr(a.IP, ip) }) {
			h.pods = append(h.pods, p)
		}
	}
	// docs/ip.md: active first, pod-network before hostNetwork, then
	// namespace/name.
	slices.SortFunc(h.pods, func(a, b corev1.Pod) int {
		if podActive(&a) != podActive(&b) {
			return boolFirst(podActive(&a))
		}
		if a.Spec.HostNetwork != b.Spec.HostNetwork {
			return boolFirst(!a.Spec.HostNetwork)
		}
		return strings.Compare(podKey(&a), podKey(&b))
	})
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return h, err
	}
	slices.SortFunc(svcs.Items, func(a, b corev1.Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, s := range svcs.Items {
		add := func(role string) {
			h.services = append(h.services, s)
			h.svcRoles = append(h.svcRoles, role)
		}
		for _, a := range s.Spec.ClusterIPs {
			if a != corev1.ClusterIPNone && sameAddr(a, ip) {
				add("clusterIP")
			}
		}
		for _, a := range s.Spec.ExternalIPs {
			if sameAddr(a, ip) {
				add("externalIP")
			}
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" && sameAddr(in.IP, ip) {
				add("loadBalancer")
			}
		}
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return h, err
	}
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			role := map[corev1.NodeAddressType]string{corev1.NodeInternalIP: "nodeInternal", corev1.NodeExternalIP: "nodeExternal"}[a.Type]
			if role != "" && sameAddr(a.Address, ip) {
				h.nodes = append(h.nodes, n)
				h.nodeRole = append(h.nodeRole, role)
			}
		}
	}
	return h, nil
}

func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}

func (h heldByAPIServer) empty() bool {
	return len(h.pods)+len(h.services)+len(h.nodes) == 0
}

// match is docs/ip.md's table: one owner (an active pod-network pod or a
// Service) is pod or service, several are ambiguous; then hostNetwork pods,
// a node alone, and pods that finished.
func (h heldByAPIServer) match() string {
	var pod, host int
	for i := range h.pods {
		switch p := &h.pods[i]; {
		case !podActive(p):
		case p.Spec.HostNetwork:
			host++
		default:
			pod++
		}
	}
	switch {
	case pod+len(h.services) > 1:
		return "ambiguous"
	case pod == 1:
		return "pod"
	case len(h.services) == 1:
		return "service"
	case host > 0:
		return "hostNetwork"
	case len(h.nodes) > 0:
		return "node"
	case len(h.pods) > 0:
		return "completed"
	}
	return ""
}

// declares reports whether a pod declares port/protocol as a container's
// containerPort or hostPort.
func declares(p *corev1.Pod, port int32, protocol corev1.Protocol) bool {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			proto := orTCP(cp.Protocol)
			if proto == protocol && (cp.ContainerPort == port || cp.HostPort == port) {
				return true
			}
		}
	}
	return false
}

func serviceDeclares(s *corev1.Service, port int32, protocol corev1.Protocol) bool {
	return slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Port == port && orTCP(p.Protocol) == protocol
	})
}

func orTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// want is the answer docs/ip.md promises for the holders, with port (0:
// none) narrowing an address they share.
func (h heldByAPIServer) want(port int32, protocol corev1.Protocol) ownersView {
	protocol = orTCP(protocol)
	v := ownersView{Match: h.match()}
	pods, services, nodes := h.pods, h.services, h.nodes
	svcRoles := h.svcRoles
	shared := v.Match == "service" || v.Match == "hostNetwork" || v.Match == "node" || v.Match == "ambiguous"
	if port != 0 && shared {
		v.Port = &portAnswer{Number: port, Protocol: string(protocol)}
		var dp []int
		for i := range pods {
			if p := &pods[i]; podActive(p) && p.Spec.HostNetwork && declares(p, port, protocol) {
				dp = append(dp, i)
			}
		}
		var ds []int
		for i := range services {
			if serviceDeclares(&services[i], port, protocol) {
				ds = append(ds, i)
			}
		}
		v.Port.Declared = len(dp)+len(ds) > 0
		switch {
		case len(dp) == 1 && len(ds) == 0:
			pods, services, svcRoles = pods[dp[0]:dp[0]+1], nil, nil
			v.Match, v.Via = "pod", "port"
		case len(ds) == 1 && len(dp) == 0:
			pods, services, svcRoles = nil, services[ds[0]:ds[0]+1], svcRoles[ds[0]:ds[0]+1]
			v.Match, v.Via = "service", "port"
		}
	}
	for i := range pods {
		p := &pods[i]
		v.Pods = append(v.Pods, podLine(p.Namespace, p.Name, string(p.UID), podActive(p), p.Spec.HostNetwork))
	}
	for i, s := range services {
		v.Services = append(v.Services, s.Namespace+"/"+s.Name+" "+string(s.UID)+" "+svcRoles[i])
	}
	for i, n := range nodes {
		v.Nodes = append(v.Nodes, n.Name+" "+string(n.UID)+" "+h.nodeRole[i])
	}
	return v
}

// sameOwnersNow is nil when kubeindex's GET /api/v1/ip/{ip} (with port and
// protocol when port is not 0) names exactly the holders the API server
// has, with their UIDs and roles, docs/ip.md's match, and the objects of
// the summary in its items; a 404 when the API server has none. It returns
// kubeindex's answer.
func sameOwnersNow(ctx context.Context, k *kubeindex, cs kubernetes.Interface, ip string, port int32, protocol corev1.Protocol) (ownersAnswer, error) {
	var got ownersAnswer
	h, err := apiServerHolders(ctx, cs, ip)
	if err != nil {
		return got, err
	}
	path := ipPath(ip, "", port, protocol)
	resp, err := k.try(path)
	if err != nil {
		return got, err
	}
	if h.empty() {
		if resp.code != http.StatusNotFound {
			return got, fmt.Errorf("GET %s: %d, want 404: the API server has no holder: %s", path, resp.code, resp.body)
		}
		return got, nil
	}
	if resp.code != http.StatusOK {
		return got, fmt.Errorf("GET %s: %d %s", path, resp.code, resp.body)
	}
	if err := json.Unmarshal(resp.body, &got); err != nil {
		return got, err
	}
	if d := cmp.Diff(h.want(port, protocol), got.view()); d != "" {
		return got, fmt.Errorf("GET %s: differs from the API server's holders (-API server +kubeindex):\n%s", path, d)
	}
	if err := ownersItemsInOrder(got); err != nil {
		return got, fmt.Errorf("GET %s: %w", path, err)
	}
	return got, nil
}

// ownersItemsInOrder checks that items are the objects the summary names,
// with the same UIDs, pods then Services then nodes.
func ownersItemsInOrder(a ownersAnswer) error {
	var want []string
	for _, p := range a.Pods {
		want = append(want, "Pod "+p.Namespace+"/"+p.Name+" "+p.UID)
	}
	for _, s := range a.Services {
		want = append(want, "Service "+s.Namespace+"/"+s.Name+" "+s.UID)
	}
	for _, n := range a.Nodes {
		want = append(want, "Node /"+n.Name+" "+n.UID)
	}
	var got []string
	for _, raw := range a.Items {
		var o struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return err
		}
		got = append(got, o.Kind+" "+o.Metadata.Namespace+"/"+o.Metadata.Name+" "+string(o.Metadata.UID))
	}
	if d := cmp.Diff(want, got); d != "" {
		return fmt.Errorf("items are not the objects of the summary, in order (-summary +items):\n%s", d)
	}
	return nil
}

// ipPath is GET /api/v1/ip/{ip} with at (RFC 3339) and port when set.
func ipPath(ip, at string, port int32, protocol corev1.Protocol) string {
	q := url.Values{}
	if at != "" {
		q.Set("at", at)
	}
	if port != 0 {
		q.Set("port", fmt.Sprint(port))
		if protocol != "" {
			q.Set("protocol", string(protocol))
		}
	}
	p := "/api/v1/ip/" + url.PathEscape(ip)
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

// statusBody is an error answer (a Kubernetes Status).
type statusBody struct {
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// post POSTs body to path with an Accept header.
func (k *kubeindex) post(path, accept string, body []byte) (response, error) {
	req, err := http.NewRequest(http.MethodPost, k.URL+path, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{code: res.StatusCode, header: res.Header, body: b}, nil
}

// batchQ is one query of POST /api/v1/ip:lookup, and how the same question
// is asked of GET /api/v1/ip/{ip}.
type batchQ struct {
	IP       string `json:"ip"`
	At       any    `json:"at,omitempty"`
	Port     any    `json:"port,omitempty"`
	Protocol string `json:"protocol,omitempty"`
}

func (q batchQ) getPath() string {
	v := url.Values{}
	if q.At != nil {
		v.Set("at", fmt.Sprint(q.At))
	}
	if q.Port != nil {
		v.Set("port", fmt.Sprint(q.Port))
	}
	if q.Protocol != "" {
		v.Set("protocol", q.Protocol)
	}
	p := "/api/v1/ip/" + url.PathEscape(q.IP)
	if len(v) > 0 {
		p += "?" + v.Encode()
	}
	return p
}

// checkBatchAgreesWithGets posts queries as one batch, as JSON and as
// NDJSON, and checks that each slot holds what GET says to the same
// question: the same summary (without the objects and metadata), or an
// error with the same code, reason and message. It returns the slots.
func checkBatchAgreesWithGets(t *testing.T, k *kubeindex, queries []batchQ) []map[string]any {
	t.Helper()
	body, err := json.Marshal(map[string]any{"queries": queries})
	if err != nil {
		t.Fatal(err)
	}
	r, err := k.post("/api/v1/ip:lookup", "", body)
	if err != nil {
		t.Fatal(err)
	}
	if r.code != http.StatusOK {
		t.Fatalf("POST /api/v1/ip:lookup: %d %s", r.code, r.body)
	}
	var doc struct {
		Kind    string           `json:"kind"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("POST /api/v1/ip:lookup: %v: %s", err, r.body)
	}
	if doc.Kind != "IPLookupBatch" || len(doc.Results) != len(queries) {
		t.Fatalf("POST /api/v1/ip:lookup: kind %q with %d results, want IPLookupBatch with %d", doc.Kind, len(doc.Results), len(queries))
	}
	nd, err := k.post("/api/v1/ip:lookup", "application/x-ndjson", body)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(nd.body), "\n"), "\n")
	if nd.code != http.StatusOK || !strings.HasPrefix(nd.header.Get("Content-Type"), "application/x-ndjson") || len(lines) != len(queries) {
		t.Fatalf("POST /api/v1/ip:lookup as NDJSON: %d %s, %d lines for %d queries", nd.code, nd.header.Get("Content-Type"), len(lines), len(queries))
	}
	for i, q := range queries {
		var line map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &line); err != nil {
			t.Fatalf("NDJSON line %d: %v: %s", i, err, lines[i])
		}
		if d := cmp.Diff(doc.Results[i], line); d != "" {
			t.Errorf("query %d %+v: the NDJSON line differs from the JSON slot (-JSON +NDJSON):\n%s", i, q, d)
		}
		g := k.get(t, q.getPath())
		var single map[string]any
		if err := json.Unmarshal(g.body, &single); err != nil {
			t.Fatalf("GET %s: %v: %s", q.getPath(), err, g.body)
		}
		var want map[string]any
		if g.code == http.StatusOK {
			want = single
			for _, k := range []string{"kind", "apiVersion", "metadata", "items"} {
				delete(want, k)
			}
		} else {
			want = map[string]any{"ip": q.IP, "error": map[string]any{
				"code": single["code"], "reason": single["reason"], "message": single["message"]}}
		}
		if d := cmp.Diff(want, doc.Results[i]); d != "" {
			t.Errorf("query %d %+v: the batch's slot differs from GET %s (%d) (-GET +batch):\n%s", i, q, q.getPath(), g.code, d)
		}
	}
	return doc.Results
}

// slotCode is the error code of a batch slot, or 200 for an answer.
func slotCode(slot map[string]any) int {
	e, ok := slot["error"].(map[string]any)
	if !ok {
		return http.StatusOK
	}
	c, _ := e["code"].(float64)
	return int(c)
}

// runningPod creates pod and writes its status as a kubelet would for a
// started pod holding ips; it returns the API server's object.
func runningPod(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, ips []string) (*corev1.Pod, error) {
	created, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	start := metav1.NewTime(time.Now().Truncate(time.Second))
	created.Status.Phase = corev1.PodRunning
	created.Status.StartTime = &start
	created.Status.HostIP = "198.51.100.250"
	created.Status.HostIPs = []corev1.HostIP{{IP: created.Status.HostIP}}
	created.Status.PodIP = ips[0]
	created.Status.PodIPs = nil
	for _, ip := range ips {
		created.Status.PodIPs = append(created.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start}}
	updated, err := cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return updated, nil
}

// newPod is a pod bound to node (there is no scheduler) with one container
// declaring ports.
func newPod(ns, name, node string, hostNetwork bool, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			HostNetwork:                   hostNetwork,
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
			Containers:                    []corev1.Container{{Name: "main", Image: "registry.example/" + name + ":1", Ports: ports}},
		},
	}
}

// deleteNow deletes a pod at once (grace period 0), as a kubelet confirms
// a pod's end; deleteGracefully leaves it terminating, still holding its
// address until deleteNow: there is no kubelet to finish it.
func deleteNow(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) error {
	return cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)), Preconditions: &metav1.Preconditions{UID: &p.UID}})
}

func deleteGracefully(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) error {
	return cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(30)), Preconditions: &metav1.Preconditions{UID: &p.UID}})
}
