package query

// Keys over time. A live window is kept current by events; a key whose
// value or truth changes with the clock alone would let it go stale.

// Moving reports whether the key's value changes with time without the
// object changing: a date column printed as an age (a custom resource's),
// which is read from the printed cell at the moment it is rendered. Age
// itself is not moving as a value: it is read as the creation time.
func (k Key) Moving() bool { return k.kind == columnKey && k.typ == durationType }

// Moving returns a term of f whose truth changes with time without the
// object changing (an age compared with a duration is a creation time
// compared with a moment fixed when the filter was read), with the
// parameter occurrence it is in (1-based); ok is false when there is
// none.
func (f Filter) Moving() (key Key, clause int, ok bool) {
	for i, c := range f {
		for _, t := range c {
			if t.Key.Moving() || (t.Key.kind == ageKey && t.Op != OpExists && t.Op != OpNotExists) {
				return t.Key, i + 1, true
			}
		}
	}
	return Key{}, 0, false
}
