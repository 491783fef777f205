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
	ans, _, err := x.at(norm, q.At, q.Visible)
	out.History = &ans
	if err != nil {
		return err
	}
	out.Match = classifyOwners(ans.Owners)
	if q.Port.Number != 0 && sharedMatch(out.Match) {
		ans.Owners = out.narrowHistory(ans.Owners, q.Port)
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

// narrowHistory is narrowByPort over the owners at a moment, by the ports
// each declared then: the one owner declaring the port, and, as now, the
// nodes whose address it is.
func (l *Answer[O]) narrowHistory(owners []Interval, p Port) []Interval {
	l.Port = &PortAnswer{Number: p.Number, Protocol: p.Protocol}
	declared := -1
	for i := range owners {
		if slices.Contains(owners[i].Ports, p) {
			if declared >= 0 {
				l.Port.Declared = true
				return owners
			}
			declared = i
		}
	}
	l.Port.Declared = declared >= 0
	if declared < 0 {
		return owners
	}
	l.Via = "port"
	if owners[declared].Kind == Pod {
		l.Match = MatchPod
	} else {
		l.Match = MatchService
	}
	kept := owners[:0]
	for i, o := range owners {
		if i == declared || o.Kind == Node {
			kept = append(kept, o)
		}
	}
	return kept
}
