package query

import (
	"cmp"
	"slices"
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
	groups map[groupID]*Group
	buf    [4]Value
}

// groupID is a group's values as a map key: comparing two Values is
// comparing their kind, number and text, so the values themselves are
// the key and counting an object builds no string.
type groupID [MaxGroupBy]Value

// NewCounter counts by keys.
func NewCounter(keys []Key) *Counter {
	return &Counter{keys: keys, groups: map[groupID]*Group{}}
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
	var id groupID
	for i, k := range c.keys {
		id[i] = k.first(r, c.buf[:0])
	}
	g := c.groups[id]
	if g == nil {
		g = &Group{Values: slices.Clone(id[:len(c.keys)])}
		c.groups[id] = g
	}
	if g.Count += by; g.Count <= 0 {
		delete(c.groups, id)
	}
}

// AddRows counts n objects whose keys' first values are row, in the
// Counter's key order; a negative n uncounts objects counted before.
func (c *Counter) AddRows(row []Value, n int) {
	c.total += n
	if len(c.keys) == 0 {
		return
	}
	var id groupID
	copy(id[:], row[:len(c.keys)])
	g := c.groups[id]
	if g == nil {
		g = &Group{Values: slices.Clone(id[:len(c.keys)])}
		c.groups[id] = g
	}
	if g.Count += n; g.Count <= 0 {
		delete(c.groups, id)
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
