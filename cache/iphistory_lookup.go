package cache

import (
	"fmt"
	"slices"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/text"
)

// lookupAt answers q from the history: the owners of q.IP at q.At, with
// the answer's certainty, classified as a lookup of now is. A port
// narrows as it does now, from the ports the owners declared then.
func (c *Cache) lookupAt(q IPQuery) (IPLookup, error) {
	var out IPLookup
	pods, _, podErr := c.podIPIndex()
	if podErr == nil {
		out.Resource, out.Freshness = pods.res, pods.freshness()
	}
	if r := c.ownerResource("services"); r != nil {
		out.ServiceResource = r.res
	}
	if r := c.ownerResource("nodes"); r != nil {
		out.NodeResource = r.res
	}
	norm, ok := indexers.NormalizeIP(q.IP)
	if !ok {
		return out, fmt.Errorf("%w: %q is not an IPv4 or IPv6 address", ErrInvalid, text.Truncate(q.IP, 64))
	}
	out.IP = norm
	if c.history == nil {
		return out, fmt.Errorf("%w: the IP history is off (--ip-history=0): no answer at a moment", ErrInvalid)
	}
	var visible func(kind, namespace string) bool
	if q.Visible != nil {
		visible = func(kind, namespace string) bool { return q.Visible(out.kindResource(kind), namespace) }
	}
	ans, found, err := c.history.at(norm, q.At, visible)
	out.History = &ans
	if err != nil {
		return out, err
	}
	out.Match = classifyOwners(ans.Owners)
	if q.Port.Number != 0 && sharedMatch(out.Match) {
		found = out.narrowHistory(found, q.Port)
		ans.Owners = ans.Owners[:0]
		for _, iv := range found {
			ans.Owners = append(ans.Owners, iv.owner())
		}
	}
	return out, nil
}

// classifyOwners is classifyAll over owners from the history, where every
// pod held the address while it was active.
func classifyOwners(owners []IPOwner) Match {
	var pods []IPPod
	var services, nodes int
	for _, o := range owners {
		switch o.Kind {
		case "Pod":
			pods = append(pods, IPPod{HostNetwork: o.HostNetwork, Active: true})
		case "Service":
			services++
		case "Node":
			nodes++
		}
	}
	return classifyAll(pods, services, nodes)
}

// narrowHistory is narrowByPort over intervals: the one owner declaring
// the port, and, as now, the nodes whose address it is.
func (l *IPLookup) narrowHistory(found []*interval, p indexers.Port) []*interval {
	l.Port = &PortAnswer{Number: p.Number, Protocol: p.Protocol}
	var declared []*interval
	for _, iv := range found {
		if slices.Contains(iv.ports, p) {
			declared = append(declared, iv)
		}
	}
	l.Port.Declared = len(declared) > 0
	if len(declared) != 1 {
		return found
	}
	l.Via = "port"
	if declared[0].who.kind == "Pod" {
		l.Match = MatchPod
	} else {
		l.Match = MatchService
	}
	return slices.DeleteFunc(found, func(iv *interval) bool { return iv != declared[0] && iv.who.kind != "Node" })
}

// IPHistoryStats describes the address history, for metrics; ok is false
// when the history is off. Safe for concurrent use.
func (c *Cache) IPHistoryStats() (IPHistoryStats, bool) {
	if c.history == nil {
		return IPHistoryStats{}, false
	}
	return c.history.stats(), true
}
