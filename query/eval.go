package query

import (
	"cmp"
	"strings"
)

// Match reports whether r passes every clause: some term of each.
func (f Filter) Match(r *Record) bool {
	var buf [8]Value
	for _, c := range f {
		ok := false
		for _, t := range c {
			if t.match(r, buf[:0]) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// NeedsCells reports whether evaluating f renders Table rows.
func (f Filter) NeedsCells() bool {
	for _, c := range f {
		for _, t := range c {
			if t.Key.NeedsCells() {
				return true
			}
		}
	}
	return false
}

// Terms counts f's terms.
func (f Filter) Terms() int {
	n := 0
	for _, c := range f {
		n += len(c)
	}
	return n
}

// match evaluates one term. Over a key with several values (a path
// through arrays) a positive comparison holds when some value satisfies
// it; != and notin hold when no value is equal (a missing key included,
// as label selectors read them).
func (t Term) match(r *Record, buf []Value) bool {
	return t.test(t.Key.Values(r, buf))
}

// test evaluates the term on its key's values.
func (t Term) test(vs []Value) bool {
	switch t.Op {
	case OpExists:
		return len(vs) > 0
	case OpNotExists:
		return len(vs) == 0
	case OpNe, OpNotIn:
		return !t.anyEqual(vs)
	case OpEq, OpIn:
		return t.anyEqual(vs)
	case OpContains:
		for _, v := range vs {
			if strings.Contains(strings.ToLower(v.String()), t.lits[0].raw) {
				return true
			}
		}
		return false
	}
	for _, v := range vs {
		c, ok := order(v, t.lits[0])
		if !ok {
			continue
		}
		switch t.Op {
		case OpLt:
			ok = c < 0
		case OpLe:
			ok = c <= 0
		case OpGt:
			ok = c > 0
		case OpGe:
			ok = c >= 0
		}
		if ok {
			return true
		}
	}
	return false
}

func (t Term) anyEqual(vs []Value) bool {
	for _, v := range vs {
		for _, l := range t.lits {
			if c, ok := order(v, l); ok && c == 0 {
				return true
			}
		}
	}
	return false
}

// order compares a value with a literal: numbers with numeric literals,
// text with the literal's text; a number and a literal that is not one
// do not compare.
func order(v Value, l literal) (int, bool) {
	switch v.kind {
	case number:
		if !l.isNum {
			return 0, false
		}
		return cmp.Compare(v.num, l.num), true
	case text:
		return strings.Compare(v.str, l.raw), true
	}
	return 0, false
}

// SortValues are r's values of the sort keys, read once per object so
// that a sort compares without reading again.
func SortValues(keys []SortKey, r *Record) []Value {
	out := make([]Value, len(keys))
	for i, k := range keys {
		out[i] = k.Key.First(r)
	}
	return out
}

// CompareSorted orders two objects by their sort values (see
// SortValues), then by namespace and name. A missing value sorts after
// every present one in either direction.
func CompareSorted(keys []SortKey, a, b []Value, aNS, aName, bNS, bName string) int {
	for i, k := range keys {
		x, y := a[i], b[i]
		if x.kind == missing || y.kind == missing {
			if c := cmp.Compare(boolInt(x.kind == missing), boolInt(y.kind == missing)); c != 0 {
				return c
			}
			continue
		}
		c := Compare(x, y)
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	if c := strings.Compare(aNS, bNS); c != 0 {
		return c
	}
	return strings.Compare(aName, bName)
}

// NeedsCells reports whether reading the keys renders Table rows.
func NeedsCells(keys []SortKey) bool {
	for _, k := range keys {
		if k.Key.NeedsCells() {
			return true
		}
	}
	return false
}

// Compiled is a filter evaluated on values a caller keeps per object
// rather than on a Record: a scan over many objects reads one row of
// values per object, not the object.
type Compiled struct {
	f    Filter
	keys []Key
	at   [][]int // at[clause][term]: the index of the term's key in keys
}

// Compile prepares f for MatchRow.
func (f Filter) Compile() *Compiled {
	c := &Compiled{f: f}
	idx := map[string]int{}
	for _, cl := range f {
		row := make([]int, len(cl))
		for j, t := range cl {
			i, ok := idx[t.Key.name]
			if !ok {
				i = len(c.keys)
				idx[t.Key.name] = i
				c.keys = append(c.keys, t.Key)
			}
			row[j] = i
		}
		c.at = append(c.at, row)
	}
	return c
}

// Keys are the distinct keys the filter reads, in the order MatchRow
// takes their values.
func (c *Compiled) Keys() []Key { return c.keys }

// MatchRow is Match for an object each of whose keys (Keys) has at most
// one value: row[i] is key i's value, Missing when it has none.
func (c *Compiled) MatchRow(row []Value) bool {
	for ci, cl := range c.f {
		ok := false
		for j, t := range cl {
			v := row[c.at[ci][j] : c.at[ci][j]+1]
			if v[0].kind == missing {
				v = nil
			}
			if t.test(v) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
