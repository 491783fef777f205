package ipowner

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kubeindex/kubeindex/internal/text"
)

// Query is one question about an address: who holds IP now, or at At,
// and, when Port is set, which of several holders serves that port.
type Query struct {
	IP string
	// At, when not zero, asks the history instead of the owner table.
	At time.Time
	// Port narrows shared addresses; Number 0 means no port.
	Port Port
	// Visible, when set, keeps only the holders it accepts (namespace ""
	// for a node) before anything else is decided: the answer is
	// classified, narrowed by port, given a certainty or found empty from
	// those alone, so a caller learns nothing of the others, not even that
	// they exist. nil keeps all.
	Visible func(kind Kind, namespace string) bool
}

// Match says what an IP address turned out to belong to.
type Match string

const (
	// MatchPod: exactly one running (or pending) pod has the address.
	MatchPod Match = "pod"
	// MatchHostNetwork: the address is a node's; the pods using it run with
	// hostNetwork and share it. None of them owns it.
	MatchHostNetwork Match = "hostNetwork"
	// MatchAmbiguous: several pods that are not hostNetwork, or Services,
	// claim the address at once (Services may share an external IP: a
	// port tells them apart).
	MatchAmbiguous Match = "ambiguous"
	// MatchCompleted: only pods that have finished (Succeeded or Failed)
	// had the address; it may be free or about to be reused.
	MatchCompleted Match = "completed"
	// MatchService: one Service holds the address (ClusterIP, external IP
	// or load-balancer address) and no pod does.
	MatchService Match = "service"
	// MatchNode: the address is a node's and no active pod uses it.
	MatchNode Match = "node"
)

// PortAnswer says what a port query found: Declared is false when none
// of the holders that share the address declares the port, and the
// answer is then not narrowed (never a guess).
type PortAnswer struct {
	Number   int32  `json:"number"`
	Protocol string `json:"protocol"`
	Declared bool   `json:"declared"`
}

// Answer answers "who has this IP". Pods are ordered active first, then
// non-hostNetwork first, then by namespace/name; Services and Nodes by
// namespace/name (a Service's roles in the order it holds them). Items,
// ServiceItems and NodeItems are the objects (O: whatever the feeder
// stores) of Pods, Services and Nodes, index for index. With History set,
// the answer is at a moment and holds no owners of now and no objects.
// The slices may be shared with the table and with other answers:
// read-only.
type Answer[O any] struct {
	IP                      string
	Match                   Match
	Pods, Services, Nodes   []Owner
	Items                   []O
	ServiceItems, NodeItems []O
	// Via is "port" when a port query picked the one holder.
	Via  string
	Port *PortAnswer
	// History is the answer at a moment (Query.At), else nil.
	History *HistoryAnswer

	// encoded is what AppendHolders appends while the holders are the
	// owner table's, unnarrowed; nil otherwise.
	encoded []byte
}

// parseAddress reads an address as indexers.NormalizeIP does, into the
// table's key. norm is the normalized spelling when it costs nothing (an
// IPv4 address is its own), else "": then addressString, or the holders'
// ip, is it.
func parseAddress(v string) (addr netip.Addr, norm string, ok bool) {
	v = strings.TrimSpace(v)
	addr, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Addr{}, "", false
	}
	if addr.Is4() {
		return addr, v, true // ParseAddr takes IPv4 only in its canonical spelling
	}
	return addr.WithZone("").Unmap(), "", true
}

// addressString is the normalized spelling of what parseAddress read.
func addressString(addr netip.Addr, norm string) string {
	if norm != "" {
		return norm
	}
	return addr.String()
}

// Normalize returns the normalized spelling of an address
// (indexers.NormalizeIP), or the ErrInvalid every answer gives for one
// that is not an address.
func Normalize(ip string) (string, error) {
	addr, norm, ok := parseAddress(ip)
	if !ok {
		return "", notAnAddress(ip)
	}
	return addressString(addr, norm), nil
}

func notAnAddress(ip string) error {
	return fmt.Errorf("%w: %q is not an IPv4 or IPv6 address", ErrInvalid, text.Truncate(ip, 64))
}

// setHolders makes h the answer's holders: the table's own slices, shared.
func (l *Answer[O]) setHolders(h *holders[O]) {
	l.Pods, l.Services, l.Nodes, l.Items, l.ServiceItems, l.NodeItems = h.lists()
	l.encoded = h.encoding()
}

// finish decides the answer from its holders, all of them found: keeps
// those q.Visible accepts, then classifies and narrows by q.Port.
// podsOnly words the error of an address nobody holds as it always was
// when only pods answer.
func (l *Answer[O]) finish(q Query, podsOnly bool) error {
	if q.Visible != nil {
		l.keepVisible(q.Visible)
	}
	if len(l.Pods)+len(l.Services)+len(l.Nodes) == 0 {
		if podsOnly {
			return fmt.Errorf("no pod has IP %s: %w", l.IP, ErrNotFound)
		}
		return fmt.Errorf("no pod, service or node has IP %s: %w", l.IP, ErrNotFound)
	}
	l.Match = classify(l.Pods, len(l.Services), len(l.Nodes))
	if q.Port.Number != 0 {
		l.narrowByPort(q.Port)
	}
	return nil
}

// classify decides what holds the address. An active pod that is not
// hostNetwork owns its address; so does a Service. Two such owners at
// once are ambiguous. Then hostNetwork pods, which share a node's
// address, then the node alone, then pods that have completed. Every pod
// counts as active in an answer at a moment (the history holds pods while
// they are).
func classify(pods []Owner, services, nodes int) Match {
	c := census{services: services, nodes: nodes}
	for i := range pods {
		c.pod(pods[i].HostNetwork, pods[i].Active())
	}
	return c.match()
}

// census counts an address's holders as classify weighs them.
type census struct{ pods, hostNetwork, completed, services, nodes int }

func (c *census) pod(hostNetwork, active bool) {
	switch {
	case !active:
		c.completed++
	case hostNetwork:
		c.hostNetwork++
	default:
		c.pods++
	}
}

func (c *census) match() Match {
	switch {
	case c.pods+c.services > 1:
		return MatchAmbiguous
	case c.pods == 1:
		return MatchPod
	case c.services == 1:
		return MatchService
	case c.hostNetwork > 0:
		return MatchHostNetwork
	case c.nodes > 0:
		return MatchNode
	case c.completed > 0:
		return MatchCompleted
	}
	return ""
}

// sharedMatch reports whether a port can tell an address's holders apart.
func sharedMatch(m Match) bool {
	return m == MatchService || m == MatchHostNetwork || m == MatchNode || m == MatchAmbiguous
}

// narrowByPort picks, among the holders that share the address (active
// hostNetwork pods and Services: the owners with ports), the one that
// declares port. Exactly one: the answer is that one, Via "port". None,
// or several: the answer stays as it was and says so. An address a pod
// owns outright (match pod or completed) is not narrowed and Port stays
// nil.
func (l *Answer[O]) narrowByPort(p Port) {
	if !sharedMatch(l.Match) {
		return
	}
	l.Port = &PortAnswer{Number: p.Number, Protocol: p.Protocol}
	var pods []int
	for i := range l.Pods {
		if pod := &l.Pods[i]; pod.Active() && pod.HostNetwork && slices.Contains(pod.Ports, p) {
			pods = append(pods, i)
		}
	}
	var services []int
	for i := range l.Services {
		if slices.Contains(l.Services[i].Ports, p) {
			services = append(services, i)
		}
	}
	l.Port.Declared = len(pods)+len(services) > 0
	switch {
	case len(pods) == 1 && len(services) == 0:
		i := pods[0]
		l.Pods, l.Items = l.Pods[i:i+1:i+1], l.Items[i:i+1:i+1]
		l.Services, l.ServiceItems = nil, nil
		l.Match, l.Via, l.encoded = MatchPod, "port", nil
	case len(services) == 1 && len(pods) == 0:
		i := services[0]
		l.Services, l.ServiceItems = l.Services[i:i+1:i+1], l.ServiceItems[i:i+1:i+1]
		l.Pods, l.Items = nil, nil
		l.Match, l.Via, l.encoded = MatchService, "port", nil
	}
}

// keepVisible keeps the holders visible accepts (see Query.Visible). The
// lists may be shared: a list with a hidden holder is copied, never
// filtered in place.
func (l *Answer[O]) keepVisible(visible func(Kind, string) bool) {
	pods, services, nodes := len(l.Pods), len(l.Services), len(l.Nodes)
	l.Pods, l.Items = keepIf(l.Pods, l.Items, visible)
	l.Services, l.ServiceItems = keepIf(l.Services, l.ServiceItems, visible)
	l.Nodes, l.NodeItems = keepIf(l.Nodes, l.NodeItems, visible)
	if len(l.Pods) != pods || len(l.Services) != services || len(l.Nodes) != nodes {
		l.encoded = nil
	}
}

// keepIf returns the owners visible accepts with their objects, the same
// slices when it accepts all, nil when none (an encoder tells nil from
// empty).
func keepIf[O any](owners []Owner, items []O, visible func(Kind, string) bool) ([]Owner, []O) {
	keep := func(o *Owner) bool { return visible(o.Kind, o.Namespace) }
	first := -1
	for i := range owners {
		if !keep(&owners[i]) {
			first = i
			break
		}
	}
	if first < 0 {
		return owners, items
	}
	outOwners, outItems := slices.Clone(owners[:first:first]), slices.Clone(items[:first:first])
	for i := first + 1; i < len(owners); i++ {
		if keep(&owners[i]) {
			outOwners, outItems = append(outOwners, owners[i]), append(outItems, items[i])
		}
	}
	if len(outOwners) == 0 {
		return nil, nil
	}
	return outOwners, outItems
}
