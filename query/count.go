package query

import (
	"cmp"
	"slices"
	"strings"
)

// Group is the number of objects whose keys have these first values
// (Missing where an object has none).
type Group struct {
	Values []Value
	Count  int
}

// Counter counts objects by the first values of up to MaxGroupBy keys.
// The zero-key Counter counts every object in one group. A Counter is
// used by one goroutine.
type Counter struct {
	keys   []Key
	total  int
	groups map[string]*Group
}

// NewCounter counts by keys.
func NewCounter(keys []Key) *Counter {
	return &Counter{keys: keys, groups: map[string]*Group{}}
}

// Add counts r.
func (c *Counter) Add(r *Record) { c.adjust(r, 1) }

// Remove uncounts r, counted before by Add: a live count is adjusted by
// an update's old object and its new one.
func (c *Counter) Remove(r *Record) { c.adjust(r, -1) }

func (c *Counter) adjust(r *Record, by int) {
	c.total += by
	if len(c.keys) == 0 {
		return
	}
	var buf [MaxGroupBy]Value
	vs := buf[:len(c.keys)]
	var id strings.Builder
	for i, k := range c.keys {
		vs[i] = k.First(r)
		id.WriteByte(byte('0' + vs[i].kind))
		id.WriteString(vs[i].String())
		id.WriteByte(0)
	}
	g := c.groups[id.String()]
	if g == nil {
		g = &Group{Values: slices.Clone(vs)}
		c.groups[id.String()] = g
	}
	if g.Count += by; g.Count <= 0 {
		delete(c.groups, id.String())
	}
}

// Total is the number of objects counted.
func (c *Counter) Total() int { return c.total }

// Groups are the groups, largest first, then by their values.
func (c *Counter) Groups() []Group {
	out := make([]Group, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Group) int {
		if x := cmp.Compare(b.Count, a.Count); x != 0 {
			return x
		}
		for i := range a.Values {
			if x := Compare(a.Values[i], b.Values[i]); x != 0 {
				return x
			}
		}
		return 0
	})
	return out
}
