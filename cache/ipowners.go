package cache

import (
	"fmt"
	"slices"
	"strings"
	"time"

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

// attachOwnerTable makes the owner table and has the resources the
// lookups answer with feed it: the pods resource with a podIP index (the
// one podIPIndex picks), the Services and the nodes.
func (c *Cache) attachOwnerTable() {
	c.owners = newOwnerTable()
	var feeding []*resourceCache
	if pods, _, err := c.podIPIndex(); err == nil {
		feeding = append(feeding, pods)
	}
	for _, kind := range []string{"services", "nodes"} {
		if r := c.ownerResource(kind); r != nil {
			feeding = append(feeding, r)
		}
	}
	for _, r := range feeding {
		for _, sh := range r.shards {
			sh.ips.owners = c.owners
		}
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
	c                     *Cache
	pods, services, nodes *resourceCache
	noneErr, notSynced    error
	out                   IPLookup // the fields every answer starts with
}

// AddressLookups prepares lookups for one batch (see AddressLookups).
func (c *Cache) AddressLookups() *AddressLookups {
	a := &AddressLookups{c: c}
	a.pods, _, _ = c.podIPIndex() // nil without a podIP index: pods do not answer
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
	var out IPLookup
	err := a.LookupInto(q, &out)
	return out, err
}

// LookupInto is Lookup answering in *out, which it overwrites whole: a
// batch reuses one answer rather than copying a new one per address.
func (a *AddressLookups) LookupInto(q IPQuery, out *IPLookup) error {
	if !q.At.IsZero() {
		var err error
		*out, err = a.c.lookupAt(q)
		return err
	}
	if a.noneErr != nil {
		*out = IPLookup{}
		return a.noneErr
	}
	*out = a.out
	addr, norm, ok := parseAddress(q.IP)
	if !ok {
		out.ServiceResource, out.NodeResource = Resource{}, Resource{}
		return fmt.Errorf("%w: %q is not an IPv4 or IPv6 address", ErrInvalid, text.Truncate(q.IP, 64))
	}
	if a.notSynced != nil {
		out.IP = addressString(addr, norm)
		out.ServiceResource, out.NodeResource = Resource{}, Resource{}
		return a.notSynced
	}
	if h := a.c.owners.holders(addr); h != nil {
		out.IP = h.ip
		out.setHolders(h)
	} else {
		out.IP = addressString(addr, norm)
	}
	return out.finish(q)
}

// setHolders makes h the answer's holders: the table's own slices, shared.
func (l *IPLookup) setHolders(h *addrHolders) {
	l.Pods, l.Items, l.podPorts = h.pods, h.podItems, h.podPorts
	l.Services, l.ServiceItems, l.servicePorts = h.services, h.serviceItems, h.servicePorts
	l.Nodes, l.NodeItems = h.nodes, h.nodeItems
	l.encoded = h.encoding()
}

// finish decides the answer from its holders, all of them found: keeps
// those q.Visible accepts, then classifies and narrows by q.Port.
func (l *IPLookup) finish(q IPQuery) error {
	if q.Visible != nil {
		l.keepVisible(q.Visible)
	}
	if len(l.Pods)+len(l.Services)+len(l.Nodes) == 0 {
		return l.notFound()
	}
	l.Match = classifyAll(l.Pods, len(l.Services), len(l.Nodes))
	if q.Port.Number != 0 {
		l.narrowByPort(q.Port)
	}
	return nil
}

// notFound is the error for an address nobody holds, worded as it always
// was when only pods answer.
func (l IPLookup) notFound() error {
	if l.ServiceResource.Plural == "" && l.NodeResource.Plural == "" {
		return fmt.Errorf("no pod has IP %s: %w", l.IP, ErrNotFound)
	}
	return fmt.Errorf("no pod, service or node has IP %s: %w", l.IP, ErrNotFound)
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
		if pod.Active && pod.HostNetwork && slices.Contains(l.podPorts[i], p) {
			pods = append(pods, i)
		}
	}
	var services []int
	for i := range l.Services {
		if slices.Contains(l.servicePorts[i], p) {
			services = append(services, i)
		}
	}
	l.Port.Declared = len(pods)+len(services) > 0
	switch {
	case len(pods) == 1 && len(services) == 0:
		i := pods[0]
		l.Pods, l.Items, l.podPorts = l.Pods[i:i+1:i+1], l.Items[i:i+1:i+1], l.podPorts[i:i+1:i+1]
		l.Services, l.ServiceItems, l.servicePorts = nil, nil, nil
		l.Match, l.Via, l.encoded = MatchPod, "port", nil
	case len(services) == 1 && len(pods) == 0:
		i := services[0]
		l.Services, l.ServiceItems, l.servicePorts = l.Services[i:i+1:i+1], l.ServiceItems[i:i+1:i+1], l.servicePorts[i:i+1:i+1]
		l.Pods, l.Items, l.podPorts = nil, nil, nil
		l.Match, l.Via, l.encoded = MatchService, "port", nil
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
