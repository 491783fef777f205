package query

import "time"

// Kept is what a caller keeps for one version of an object so that a
// question reads its values without parsing it again: its Table column
// values (ColumnValues) and the values of the path and age keys read
// before. Objects are immutable, so a version's values never change; a
// Kept must return what reading the object's JSON would (Key.ReadJSON).
type Kept interface {
	// Columns are the object's ColumnValues under the record's schema.
	Columns() []Value
	// Read returns the values of a path or age key (KeptName names
	// it); the caller does not modify them.
	Read(k Key) []Value
}

// Fill makes r the record of an object whose values kept supplies,
// without allocating: a scan over many objects reuses one Record. A
// record with a Kept reads every value through it, never raw, which may
// then be nil (an object the cache holds in pieces).
func (s *Schema) Fill(r *Record, namespace, name string, raw []byte, now time.Time, kept Kept) {
	*r = Record{Namespace: namespace, Name: name, Raw: raw, schema: s, now: now, kept: kept}
}

// KeptName names what a Kept keeps for a path or an age key: the path,
// or "" for the age (read from metadata.creationTimestamp).
func (k Key) KeptName() string {
	if k.kind == ageKey {
		return ""
	}
	return k.path
}

// ReadsJSON reports whether the key is a path or age key: one whose
// values a Kept keeps by its KeptName (Kept.Read).
func (k Key) ReadsJSON() bool { return k.kind == pathKey || k.kind == ageKey }

// ReadJSON reads the values of a path or age key from an object's JSON,
// as a record without a Kept does.
func (k Key) ReadJSON(raw []byte) []Value { return k.readJSON(raw, nil) }

// Timeless reports whether the key's values of an object are the same
// whenever they are read (every key but a column of a schema that is not
// Timeless): only such values may be kept, or held in an ordered index.
func (k Key) Timeless(s *Schema) bool { return k.kind != columnKey || s.timeless }

// KeptColumn is the place among the schema's column values
// (ColumnValues) of the key's one value when it is there. An age key's
// is the Age column's, which ColumnValues reads from
// metadata.creationTimestamp as the age key does (Missing where the age
// key has no value), so a Kept that keeps the column values answers Read
// for the age from them instead of keeping a copy. The name key's is the
// Name column's (the first, which Key reads as the name key) as the
// resource's printer prints it: the object's name for every built-in
// printer, which a caller sharing it checks. false for every other key,
// and for a schema without such a column.
func (s *Schema) KeptColumn(k Key) (int, bool) {
	switch {
	case k.kind == ageKey && s.age >= 0:
		return s.age, true
	case k.kind == nameKey:
		if c, ok := s.columns["name"]; ok && c.index == 0 {
			return 0, true
		}
	}
	return 0, false
}
