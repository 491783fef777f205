package cache

import (
	"fmt"
	"slices"
	"strings"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/text"
)

// More things an address can turn out to belong to (see Match).
const (
	// MatchService: one Service holds the address (ClusterIP, external IP
	// or load-balancer address) and no pod does.
	MatchService Match = "service"
	// MatchNode: the address is a node's and no active pod uses it.
	MatchNode Match = "node"
)

// ipIndex is the internal index of Services and Nodes by the addresses
// they hold. Like nsIndex, its name cannot collide with a configured one.
const ipIndex = "__ip"

// IPQuery is one question about an address: who holds IP now, or at At,
// and, when Port is set, which of several holders serves that port.
type IPQuery struct {
	IP string
	// At, when not zero, asks the history instead of the cache.
	At time.Time
	// Port narrows shared addresses; Number 0 means no port.
	Port indexers.Port
	// Visible, when set, keeps only the holders it accepts (res is the
	// holder's resource, namespace "" for a Node) before anything else is
	// decided: the answer is classified, narrowed by port, given a
	// certainty or found empty from those alone, so a caller learns
	// nothing of the others, not even that they exist. nil keeps all.
	Visible func(res Resource, namespace string) bool
}

// IPService is a Service found by address.
type IPService struct {
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	UID       string        `json:"uid"`
	Role      indexers.Role `json:"role"`
}

// IPNode is a Node found by address.
type IPNode struct {
	Name string        `json:"name"`
	UID  string        `json:"uid"`
	Role indexers.Role `json:"role"`
}

// PortAnswer says what a port query found: Declared is false when none
// of the holders that share the address declares the port, and the
// answer is then not narrowed (never a guess).
type PortAnswer struct {
	Number   int32  `json:"number"`
	Protocol string `json:"protocol"`
	Declared bool   `json:"declared"`
}

// ownerKind tells which of the resources that can hold addresses r is.
func ownerKind(r Resource) string {
	if r.Group != "" {
		return ""
	}
	switch r.Plural {
	case "pods", "services", "nodes":
		return r.Plural
	}
	return ""
}

// heldBy returns the addresses a Service or Node object holds.
func heldBy(kind string, o *Object) []indexers.Held {
	switch kind {
	case "services":
		return indexers.ServiceAddresses(o.doc("spec"), o.doc("status"))
	case "nodes":
		return indexers.NodeAddresses(o.doc("status"))
	}
	return nil
}

// ownerIndexFunc is the index of Services and Nodes by address; nil for
// any other resource. It runs under the store's lock: it reads two members
// the object already located.
func ownerIndexFunc(r Resource) toolscache.IndexFunc {
	kind := ownerKind(r)
	if kind != "services" && kind != "nodes" {
		return nil
	}
	return func(obj any) ([]string, error) {
		if o, ok := obj.(*Object); ok {
			return indexers.HeldIPs(heldBy(kind, o)), nil
		}
		return nil, nil
	}
}

// ownerResource returns the cached resource of kind ("services", "nodes"),
// or nil when it is not configured.
func (c *Cache) ownerResource(kind string) *resourceCache {
	for _, r := range c.resources {
		if ownerKind(r.res) == kind {
			return r
		}
	}
	return nil
}

// byOwnerIndex returns the objects of r holding ip, across its shards.
func (r *resourceCache) byOwnerIndex(ip string) []*Object {
	var out []*Object
	for _, sh := range r.shards {
		items, _ := sh.informer.GetIndexer().ByIndex(ipIndex, ip)
		for _, it := range items {
			out = append(out, it.(*Object))
		}
	}
	return out
}

// LookupAddress answers q: every object that holds the address now (pods,
// Services, Nodes, as far as they are cached), or, with q.At, who held it
// then (see the history). Which kinds answer follows the configuration:
// with only pods cached, the answer is LookupIP's. Safe for concurrent use.
func (c *Cache) LookupAddress(q IPQuery) (IPLookup, error) {
	if !q.At.IsZero() {
		return c.lookupAt(q)
	}
	return c.AddressLookups().Lookup(q)
}

// AddressLookups answers many queries as LookupAddress does, for one
// batch: which resources answer, whether they have synced and their
// freshness are read once, when it is made, not per address. Safe for
// concurrent use; meant to live as long as one request.
type AddressLookups struct {
	c                          *Cache
	pods, services, nodes      *resourceCache
	index                      string
	podErr, noneErr, notSynced error
	out                        IPLookup // the fields every answer starts with
}

// AddressLookups prepares lookups for one batch (see AddressLookups).
func (c *Cache) AddressLookups() *AddressLookups {
	a := &AddressLookups{c: c}
	a.pods, a.index, a.podErr = c.podIPIndex()
	a.services, a.nodes = c.ownerResource("services"), c.ownerResource("nodes")
	first := a.pods
	for _, r := range []*resourceCache{a.services, a.nodes} {
		if first == nil {
			first = r
		}
	}
	if first == nil {
		a.noneErr = fmt.Errorf("%w: IP lookups need pods with an index of type podIP, services or nodes", ErrUnknownIndex)
		return a
	}
	a.out = IPLookup{Resource: first.res, Freshness: first.freshness()}
	for _, r := range []*resourceCache{a.pods, a.services, a.nodes} {
		if r != nil && !r.synced() {
			a.notSynced = fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
			break
		}
	}
	if a.services != nil {
		a.out.ServiceResource = a.services.res
	}
	if a.nodes != nil {
		a.out.NodeResource = a.nodes.res
	}
	return a
}

// Lookup is LookupAddress(q).
func (a *AddressLookups) Lookup(q IPQuery) (IPLookup, error) {
	if !q.At.IsZero() {
		return a.c.lookupAt(q)
	}
	if a.noneErr != nil {
		return IPLookup{}, a.noneErr
	}
	out := IPLookup{Resource: a.out.Resource, Freshness: a.out.Freshness}
	norm, ok := indexers.NormalizeIP(q.IP)
	if !ok {
		return out, fmt.Errorf("%w: %q is not an IPv4 or IPv6 address", ErrInvalid, text.Truncate(q.IP, 64))
	}
	out.IP = norm
	if a.notSynced != nil {
		return out, a.notSynced
	}
	if a.podErr == nil {
		out.findPods(a.pods, a.index)
	}
	out.ServiceResource, out.NodeResource = a.out.ServiceResource, a.out.NodeResource
	if a.services != nil {
		out.findServices(a.services.byOwnerIndex(norm))
	}
	if a.nodes != nil {
		out.findNodes(a.nodes.byOwnerIndex(norm))
	}
	if q.Visible != nil {
		out.keepVisible(q.Visible)
	}
	if len(out.Pods)+len(out.Services)+len(out.Nodes) == 0 {
		return out, out.notFound()
	}
	out.Match = classifyAll(out.Pods, len(out.Services), len(out.Nodes))
	if q.Port.Number != 0 {
		out.narrowByPort(q.Port)
	}
	return out, nil
}

// notFound is the error for an address nobody holds, worded as it always
// was when only pods answer.
func (l IPLookup) notFound() error {
	if l.ServiceResource.Plural == "" && l.NodeResource.Plural == "" {
		return fmt.Errorf("no pod has IP %s: %w", l.IP, ErrNotFound)
	}
	return fmt.Errorf("no pod, service or node has IP %s: %w", l.IP, ErrNotFound)
}

func (l *IPLookup) findPods(r *resourceCache, index string) {
	var found []any
	for _, sh := range r.shards {
		items, _ := sh.informer.GetIndexer().ByIndex(index, l.IP) // a new slice, ours
		if found == nil {
			found = items
		} else {
			found = append(found, items...)
		}
	}
	if len(found) == 0 {
		return
	}
	l.Pods, l.Items = make([]IPPod, len(found)), make([]*Object, len(found))
	for i, it := range found {
		l.Items[i] = it.(*Object)
		l.Pods[i] = summarisePod(l.Items[i])
	}
	if len(found) > 1 {
		sortPods(l.Pods, l.Items)
	}
}

func (l *IPLookup) findServices(objs []*Object) {
	slices.SortFunc(objs, compareKeys)
	for _, o := range objs {
		for _, h := range heldBy("services", o) {
			if h.IP == l.IP {
				l.Services = append(l.Services, IPService{Namespace: o.namespace, Name: o.name, UID: o.uid, Role: h.Role})
				l.ServiceItems = append(l.ServiceItems, o)
			}
		}
	}
}

func (l *IPLookup) findNodes(objs []*Object) {
	slices.SortFunc(objs, compareKeys)
	for _, o := range objs {
		for _, h := range heldBy("nodes", o) {
			if h.IP == l.IP {
				l.Nodes = append(l.Nodes, IPNode{Name: o.name, UID: o.uid, Role: h.Role})
				l.NodeItems = append(l.NodeItems, o)
			}
		}
	}
}

func compareKeys(a, b *Object) int {
	if c := strings.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// classifyAll extends classify to Services and Nodes. An active pod that
// is not hostNetwork owns its address; so does a Service. Two such owners
// at once are ambiguous (Services may share an external IP: a port tells
// them apart). Then hostNetwork pods, which share a node's address, then
// the node alone, then pods that have completed.
func classifyAll(pods []IPPod, services, nodes int) Match {
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
	case pod+services > 1:
		return MatchAmbiguous
	case pod == 1:
		return MatchPod
	case services == 1:
		return MatchService
	case host > 0:
		return MatchHostNetwork
	case nodes > 0:
		return MatchNode
	case len(pods) > 0:
		return MatchCompleted
	}
	return ""
}

// narrowByPort picks, among the holders that share the address (active
// hostNetwork pods and Services), the one that declares port. Exactly
// one: the answer is that one, Via "port". None, or several: the answer
// stays as it was and says so. An address a pod owns outright (match pod
// or completed) is not narrowed and Port stays nil.
func (l *IPLookup) narrowByPort(p indexers.Port) {
	if !sharedMatch(l.Match) {
		return
	}
	l.Port = &PortAnswer{Number: p.Number, Protocol: p.Protocol}
	var pods []int
	for i, pod := range l.Pods {
		if pod.Active && pod.HostNetwork && slices.Contains(indexers.PodPorts(l.Items[i].doc("spec")), p) {
			pods = append(pods, i)
		}
	}
	var services []int
	for i, o := range l.ServiceItems {
		if slices.Contains(indexers.ServicePorts(o.doc("spec")), p) {
			services = append(services, i)
		}
	}
	l.Port.Declared = len(pods)+len(services) > 0
	switch {
	case len(pods) == 1 && len(services) == 0:
		i := pods[0]
		l.Pods, l.Items = []IPPod{l.Pods[i]}, []*Object{l.Items[i]}
		l.Services, l.ServiceItems = nil, nil
		l.Match, l.Via = MatchPod, "port"
	case len(services) == 1 && len(pods) == 0:
		i := services[0]
		l.Services, l.ServiceItems = []IPService{l.Services[i]}, []*Object{l.ServiceItems[i]}
		l.Pods, l.Items = nil, nil
		l.Match, l.Via = MatchService, "port"
	}
}

// sharedMatch reports whether a port can tell an address's holders apart.
func sharedMatch(m Match) bool {
	return m == MatchService || m == MatchHostNetwork || m == MatchNode || m == MatchAmbiguous
}

// declaredPorts reads the ports an object declares, for the history.
func declaredPorts(kind string, o *Object) []indexers.Port {
	switch kind {
	case "pods":
		return indexers.PodPorts(o.doc("spec"))
	case "services":
		return indexers.ServicePorts(o.doc("spec"))
	}
	return nil
}
