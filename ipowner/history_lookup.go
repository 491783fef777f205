package ipowner

import (
	"fmt"
	"slices"
)

// LookupAt answers q at q.At from x into *out, which it overwrites whole:
// the owners of q.IP then, with the answer's certainty (out.History, set
// even with most errors), classified as a lookup of now is. A port
// narrows as it does now, from the ports the owners declared then. x nil:
// the history is off, and every moment is refused. Safe for concurrent
// use.
func LookupAt[O any](x *History, q Query, out *Answer[O]) error {
	*out = Answer[O]{}
	norm, err := Normalize(q.IP)
	if err != nil {
		return err
	}
	out.IP = norm
	if x == nil {
		return fmt.Errorf("%w: the IP history is off (--ip-history=0): no answer at a moment", ErrInvalid)
	}
	ans, found, err := x.at(norm, q.At, q.Visible)
	out.History = &ans
	if err != nil {
		return err
	}
	out.Match = classifyOwners(ans.Owners)
	if q.Port.Number != 0 && sharedMatch(out.Match) {
		found = out.narrowHistory(found, q.Port)
		ans.Owners = ans.Owners[:0]
		for _, iv := range found {
			ans.Owners = append(ans.Owners, iv.owner())
		}
	}
	return nil
}

// classifyOwners is classify over owners from the history, where every
// pod held the address while it was active.
func classifyOwners(owners []Interval) Match {
	var c census
	for i := range owners {
		switch o := &owners[i]; o.Kind {
		case Pod:
			c.pod(o.HostNetwork, true)
		case Service:
			c.services++
		case Node:
			c.nodes++
		}
	}
	return c.match()
}

// narrowHistory is narrowByPort over intervals: the one owner declaring
// the port, and, as now, the nodes whose address it is.
func (l *Answer[O]) narrowHistory(found []*interval, p Port) []*interval {
	l.Port = &PortAnswer{Number: p.Number, Protocol: p.Protocol}
	var declared []*interval
	for _, iv := range found {
		if slices.Contains(iv.Ports(), p) {
			declared = append(declared, iv)
		}
	}
	l.Port.Declared = len(declared) > 0
	if len(declared) != 1 {
		return found
	}
	l.Via = "port"
	if declared[0].who.kind == Pod {
		l.Match = MatchPod
	} else {
		l.Match = MatchService
	}
	return slices.DeleteFunc(found, func(iv *interval) bool { return iv != declared[0] && iv.who.kind != Node })
}
