package cache

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/indexers"
)

// Match says what an IP address turned out to belong to.
type Match string

const (
	// MatchPod: exactly one running (or pending) pod has the address.
	MatchPod Match = "pod"
	// MatchHostNetwork: the address is a node's; the pods using it run with
	// hostNetwork and share it. None of them owns it.
	MatchHostNetwork Match = "hostNetwork"
	// MatchAmbiguous: several pods that are not hostNetwork claim the
	// address at once (should not happen in a healthy cluster).
	MatchAmbiguous Match = "ambiguous"
	// MatchCompleted: only pods that have finished (Succeeded or Failed)
	// had the address; it may be free or about to be reused.
	MatchCompleted Match = "completed"
)

// IPPod summarises one pod found by IP.
type IPPod struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	UID         string `json:"uid"`
	Phase       string `json:"phase"`
	NodeName    string `json:"nodeName,omitempty"`
	HostNetwork bool   `json:"hostNetwork"`
	// Active is false for pods that have finished: they keep their IP in
	// status, but the address may already belong to another pod.
	Active bool `json:"active"`
}

// IPLookup answers "who has this IP". Pods are ordered active first, then
// non-hostNetwork first, then by namespace/name.
type IPLookup struct {
	IP        string
	Match     Match
	Pods      []IPPod
	Items     []*Object
	Resource  Resource
	Freshness Freshness
}

// LookupIP finds the pods that have ip in status.podIPs or status.podIP,
// using the first pod resource configured with a podIP index. Any spelling
// of an address works (IPv6 compressed or not, IPv4-mapped IPv6).
func (c *Cache) LookupIP(ip string) (IPLookup, error) {
	r, index, err := c.podIPIndex()
	if err != nil {
		return IPLookup{}, err
	}
	norm, ok := indexers.NormalizeIP(ip)
	if !ok {
		return IPLookup{}, fmt.Errorf("%w: %q is not an IPv4 or IPv6 address", ErrInvalid, ip)
	}
	res, err := c.List(r.res.Name, ListQuery{Index: index, Value: norm})
	out := IPLookup{IP: norm, Resource: r.res, Freshness: res.Freshness}
	if err != nil {
		return out, err
	}
	type found struct {
		pod IPPod
		obj *Object
	}
	all := make([]found, len(res.Items))
	for i, o := range res.Items {
		all[i] = found{summarisePod(o), o}
	}
	slices.SortFunc(all, func(a, b found) int { return comparePods(a.pod, b.pod) })
	for _, f := range all {
		out.Pods = append(out.Pods, f.pod)
		out.Items = append(out.Items, f.obj)
	}
	out.Match = classify(out.Pods)
	if len(out.Pods) == 0 {
		return out, fmt.Errorf("no pod has IP %s: %w", norm, ErrNotFound)
	}
	return out, nil
}

func (c *Cache) podIPIndex() (*resourceCache, string, error) {
	for _, r := range c.resources {
		if r.res.Group != "" || r.res.Plural != "pods" {
			continue
		}
		for name, s := range r.indexes {
			if s.Type == indexers.PodIP {
				return r, name, nil
			}
		}
	}
	return nil, "", fmt.Errorf("%w: IP lookups need the pods resource with an index of type podIP", ErrUnknownIndex)
}

func summarisePod(o *Object) IPPod {
	f := gjson.GetManyBytes(o.raw, "status.phase", "spec.nodeName", "spec.hostNetwork")
	p := IPPod{Namespace: o.namespace, Name: o.name, UID: o.uid,
		Phase: f[0].Str, NodeName: f[1].Str, HostNetwork: f[2].Bool()}
	p.Active = p.Phase != "Succeeded" && p.Phase != "Failed"
	return p
}

func comparePods(a, b IPPod) int {
	if a.Active != b.Active {
		return boolOrder(a.Active)
	}
	if a.HostNetwork != b.HostNetwork {
		return boolOrder(!a.HostNetwork)
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func classify(pods []IPPod) Match {
	var pod, host int
	for _, p := range pods {
		switch {
		case !p.Active:
		case p.HostNetwork:
			host++
		default:
			pod++
		}
	}
	switch {
	case pod == 1:
		return MatchPod
	case pod > 1:
		return MatchAmbiguous
	case host > 0:
		return MatchHostNetwork
	case len(pods) > 0:
		return MatchCompleted
	}
	return ""
}
