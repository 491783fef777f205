package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sort"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ipLookup is kubeindex's answer to /api/v1/ip/{ip}.
type ipLookup struct {
	Kind  string `json:"kind"`
	IP    string `json:"ip"`
	Match string `json:"match"`
	Pods  []struct {
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Phase       string `json:"phase"`
		HostNetwork bool   `json:"hostNetwork"`
		Active      bool   `json:"active"`
	} `json:"pods"`
	// Services and Nodes holding the address too (when cached).
	Services []ipOwner         `json:"services"`
	Nodes    []ipOwner         `json:"nodes"`
	Items    []json.RawMessage `json:"items"`
}

type ipOwner struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (l ipLookup) keys() []string {
	out := make([]string, len(l.Pods))
	for i, p := range l.Pods {
		out[i] = p.Namespace + "/" + p.Name
	}
	return out
}

// podsWithIP is the oracle for an IP lookup: the API server's list with
// fieldSelector=status.podIP=<ip>, plus, because that field selector only
// sees the primary address, the pods whose status.podIPs holds ip.
func podsWithIP(ctx context.Context, cs kubernetes.Interface, ip string) ([]corev1.Pod, error) {
	bySelector, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.podIP=" + ip})
	if err != nil {
		return nil, err
	}
	out := bySelector.Items
	all, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, p := range all.Items {
		if p.Status.PodIP == ip {
			continue // the field selector found it
		}
		if slices.ContainsFunc(p.Status.PodIPs, func(a corev1.PodIP) bool { return a.IP == ip }) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return podKey(&out[i]) < podKey(&out[j]) })
	return out, nil
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func podActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// expectedMatch classifies an address from the API server's pods, as the
// docs/ip.md defines "match".
func expectedMatch(pods []corev1.Pod) string {
	var owners, hostNet int
	for i := range pods {
		switch p := &pods[i]; {
		case !podActive(p):
		case p.Spec.HostNetwork:
			hostNet++
		default:
			owners++
		}
	}
	switch {
	case owners == 1:
		return "pod"
	case owners > 1:
		return "ambiguous"
	case hostNet > 0:
		return "hostNetwork"
	default:
		return "completed"
	}
}

// sameIPLookup is nil when both /api/v1/ip/{ip} and ?index=ip&value=<ip>
// answer the pods the API server has at ip, with the right match, the
// active pods first; it returns kubeindex's answer.
func sameIPLookup(ctx context.Context, k *kubeindex, cs kubernetes.Interface, ip string) (ipLookup, error) {
	var got ipLookup
	want, err := podsWithIP(ctx, cs, ip)
	if err != nil {
		return got, err
	}
	wantKeys := make([]string, len(want))
	for i := range want {
		wantKeys[i] = podKey(&want[i])
	}

	resp, err := k.try("/api/v1/ip/" + url.PathEscape(ip))
	if err != nil {
		return got, err
	}
	if len(want) == 0 {
		if resp.code != http.StatusNotFound {
			return got, fmt.Errorf("/api/v1/ip/%s: %d, want 404: the API server has no pod with it: %s", ip, resp.code, resp.body)
		}
		return got, nil
	}
	if resp.code != http.StatusOK {
		return got, fmt.Errorf("/api/v1/ip/%s: %d %s; the API server has %v", ip, resp.code, resp.body, wantKeys)
	}
	if err := json.Unmarshal(resp.body, &got); err != nil {
		return got, err
	}
	gotKeys := slices.Sorted(slices.Values(got.keys()))
	if d := cmp.Diff(wantKeys, gotKeys); d != "" {
		return got, fmt.Errorf("/api/v1/ip/%s: pods differ from the API server's (-API server +kubeindex):\n%s", ip, d)
	}
	if err := itemsInOrder(got); err != nil {
		return got, fmt.Errorf("/api/v1/ip/%s: %w", ip, err)
	}
	if len(got.Nodes) > 0 { // nodes are cached: the ones the API server says hold ip
		wantNodes, err := nodesWithIP(ctx, cs, ip)
		if err != nil {
			return got, err
		}
		var gotNodes []string
		for _, n := range got.Nodes {
			gotNodes = append(gotNodes, n.Name)
		}
		if d := cmp.Diff(wantNodes, gotNodes); d != "" {
			return got, fmt.Errorf("/api/v1/ip/%s: nodes differ from the API server's (-API server +kubeindex):\n%s", ip, d)
		}
	}
	if m := expectedMatch(want); got.Match != m {
		return got, fmt.Errorf("/api/v1/ip/%s: match %q, want %q for %v", ip, got.Match, m, wantKeys)
	}
	for i := 1; i < len(got.Pods); i++ {
		if got.Pods[i].Active && !got.Pods[i-1].Active {
			return got, fmt.Errorf("/api/v1/ip/%s: an active pod after a finished one: %+v", ip, got.Pods)
		}
	}

	// The same lookup through the generic index API.
	idx, err := k.list(podsR, url.Values{"index": {"ip"}, "value": {ip}})
	if err != nil {
		return got, err
	}
	if d := cmp.Diff(wantKeys, keys(idx)); d != "" {
		return got, fmt.Errorf("pods?index=ip&value=%s differs from the API server (-API server +kubeindex):\n%s", ip, d)
	}
	return got, nil
}

// expandIPv6 spells an IPv6 address in full, uncompressed and upper case.
func expandIPv6(ip string) string {
	a := netip.MustParseAddr(ip).As16()
	s := ""
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			s += ":"
		}
		s += fmt.Sprintf("%02X%02X", a[i], a[i+1])
	}
	return s
}

// itemsInOrder checks the answer's objects: the pods, then the Services,
// then the nodes, each the object its summary names.
func itemsInOrder(l ipLookup) error {
	var want []string
	for _, p := range l.Pods {
		want = append(want, "Pod "+p.Namespace+"/"+p.Name)
	}
	for _, s := range l.Services {
		want = append(want, "Service "+s.Namespace+"/"+s.Name)
	}
	for _, n := range l.Nodes {
		want = append(want, "Node /"+n.Name)
	}
	var got []string
	for _, raw := range l.Items {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return err
		}
		got = append(got, o.Kind+" "+o.Metadata.Namespace+"/"+o.Metadata.Name)
	}
	if d := cmp.Diff(want, got); d != "" {
		return fmt.Errorf("items are not the pods, Services and nodes of the answer, in order (-summaries +items):\n%s", d)
	}
	return nil
}

// nodesWithIP lists, sorted, the nodes whose status.addresses hold ip as
// an InternalIP or ExternalIP.
func nodesWithIP(ctx context.Context, cs kubernetes.Interface, ip string) ([]string, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) && a.Address == ip {
				out = append(out, n.Name)
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
