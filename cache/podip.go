package cache

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
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
// non-hostNetwork first, then by namespace/name; Services and Nodes by
// namespace/name. Items, ServiceItems and NodeItems are the objects of
// Pods, Services and Nodes, index for index. With At set, the answer comes
// from the history (see IPHistoryAnswer) and holds no objects. The slices
// may be shared with the cache and with other answers: read-only.
type IPLookup struct {
	IP       string
	Match    Match
	Pods     []IPPod
	Items    []*Object
	Services []IPService
	Nodes    []IPNode
	// Via is "port" when a port query picked the one holder.
	Via  string
	Port *PortAnswer
	// ServiceItems and NodeItems are the objects of Services and Nodes.
	ServiceItems, NodeItems []*Object
	// Resource is the pods resource (the first configured of pods,
	// services, nodes); ServiceResource and NodeResource are those of the
	// Services and Nodes, zero when they are not cached.
	Resource                      Resource
	ServiceResource, NodeResource Resource
	Freshness                     Freshness
	// History is the answer at a moment (IPQuery.At), else nil.
	History *IPHistoryAnswer

	// podPorts and servicePorts are the ports of Pods and Services, index
	// for index, for a port query: an active hostNetwork pod's, a Service's.
	podPorts, servicePorts [][]indexers.Port
	// encoded is what AppendHolders appends while the holders are the
	// owner table's, unnarrowed; nil otherwise.
	encoded []byte
}

// LookupIP finds the holders of ip now: LookupAddress without a moment or
// a port. Any spelling of an address works (IPv6 compressed or not,
// IPv4-mapped IPv6). Pods answer from the first pod resource configured
// with a podIP index, Services and Nodes from theirs, all through the
// owner table the informers' handler keeps (ipowners_table.go): an IP
// lookup is the hot path.
func (c *Cache) LookupIP(ip string) (IPLookup, error) {
	return c.LookupAddress(IPQuery{IP: ip})
}

// sortPods orders pods, and their objects with them, as IPLookup says.
func sortPods(pods []IPPod, items []*Object) {
	type found struct {
		pod IPPod
		obj *Object
	}
	all := make([]found, len(pods))
	for i := range pods {
		all[i] = found{pods[i], items[i]}
	}
	slices.SortFunc(all, func(a, b found) int { return comparePods(a.pod, b.pod) })
	for i, f := range all {
		pods[i], items[i] = f.pod, f.obj
	}
}

func (c *Cache) podIPIndex() (*resourceCache, string, error) {
	for _, r := range c.resources {
		if r.res.Group != "" || r.res.Plural != "pods" {
			continue
		}
		for _, s := range r.spec.Indexes { // in configuration order: the first is the one, every time
			if s.Normalized().Type == indexers.PodIP {
				return r, s.Name, nil
			}
		}
	}
	return nil, "", fmt.Errorf("%w: IP lookups need the pods resource with an index of type podIP", ErrUnknownIndex)
}

// summarisePod reads the three fields an IP answer gives besides the keys.
// Build noted where they are, so no part of the pod is scanned.
func summarisePod(o *Object) IPPod {
	spec, status := o.doc("spec"), o.doc("status")
	str := func(v []byte) string {
		if len(v) == 0 || v[0] != '"' {
			return ""
		}
		s, _ := jsonscan.String(v)
		return s
	}
	p := IPPod{Namespace: o.namespace, Name: o.name, UID: o.uid,
		Phase: str(status.Member("phase")), NodeName: str(spec.Member("nodeName")),
		HostNetwork: string(spec.Member("hostNetwork")) == "true"}
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
