package query

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/table"
)

// Schema is what keys mean for one resource: its Table columns (as
// kubectl prints them) and, for any other key, a JSON path. A Schema is
// immutable once built and safe to use from any number of goroutines.
type Schema struct {
	conv    table.Convertor
	columns map[string]column // by key name: lower case, spaces as hyphens
	names   []string          // the column keys, in the Table's order
	types   []keyType         // of every column definition, by index
	// fingerprint names the columns and their types: column values made
	// under one Schema serve another with the same fingerprint.
	fingerprint string
	// timeless: no column's value depends on the moment it is read (ages
	// are read from creationTimestamp, not from the printed cell).
	timeless bool
	// age is the place of the Age column among the column values, -1
	// when there is none: ColumnValues reads it as the age key does
	// (KeptColumn).
	age int
	// across: the key ClusterKey is the cluster (AcrossClusters).
	across bool
}

// column is a Table column and how its cells compare.
type column struct {
	index int
	typ   keyType
}

// keyType is how a key's values compare and how a filter's literal is
// read for it.
type keyType uint8

const (
	// dynamic: a JSON path; numbers compare as numbers, the rest as text.
	dynamic keyType = iota
	// textType: a column printed as text, compared by bytes.
	textType
	// numberType: an integer or number column.
	numberType
	// fractionType: a "2/3" Ready column, compared as 2/3.
	fractionType
	// restartsType: a pod's Restarts ("3 (5m ago)"), compared as 3.
	restartsType
	// ageType: the age of the object, from metadata.creationTimestamp to
	// the query's moment, compared as a duration (literals: 90s, 5m, 3d4h).
	ageType
	// durationType: a date column printed as an age (a CRD's), compared as
	// the duration printed.
	durationType
	// timeType: a date column printed as a time ("Created At"), compared
	// as that time (literals in RFC 3339).
	timeType
)

func (t keyType) String() string {
	return [...]string{"JSON", "text", "number", "fraction", "number", "duration", "duration", "time"}[t]
}

// NewSchema describes the keys of a resource whose Table conv renders.
func NewSchema(conv table.Convertor) *Schema {
	s := &Schema{conv: conv, columns: map[string]column{}, timeless: true, age: -1}
	var fp strings.Builder
	for i, def := range conv.ColumnDefinitions() {
		typ := columnType(def)
		s.types = append(s.types, typ)
		s.timeless = s.timeless && typ != durationType
		if typ == ageType && s.age < 0 {
			s.age = i
		}
		fmt.Fprintf(&fp, "%q:%d,", def.Name, typ)
		name := ColumnKey(def.Name)
		if _, dup := s.columns[name]; dup {
			continue
		}
		s.columns[name] = column{index: i, typ: typ}
		s.names = append(s.names, name)
	}
	s.fingerprint = fp.String()
	return s
}

// Fingerprint identifies the schema's columns and their types; Timeless
// reports whether column values are the same whenever they are read.
// Together they tell a caller when ColumnValues kept for an object (per
// version: objects are immutable) may serve a later question.
func (s *Schema) Fingerprint() string { return s.fingerprint }
func (s *Schema) Timeless() bool      { return s.timeless }

// ColumnValues are the typed values of each of the object's Table cells
// (Missing where a cell has none), read at now: what column keys compare.
// Rendering the row decodes the object, the costly part of a question.
// The Age column's value is not its printed cell, which the moment
// changes and no key reads, but the age key's value (KeptColumn).
func (s *Schema) ColumnValues(raw []byte, now time.Time) []Value {
	out := s.ageValue(raw)
	row, err := s.conv.Row(raw, now)
	if err != nil {
		return out
	}
	return s.cellValues(out, row)
}

// ScannedColumnValues is ColumnValues for a raw that the schema's
// convertor reads by its scan (table.Scanner), not by its decoder; ok
// is false when it does not, and nothing is made.
func (s *Schema) ScannedColumnValues(raw []byte, now time.Time) ([]Value, bool) {
	sc, ok := s.conv.(table.Scanner)
	if !ok {
		return nil, false
	}
	row, ok := sc.ScanRow(raw, now)
	if !ok {
		return nil, false
	}
	return s.cellValues(s.ageValue(raw), row), true
}

// ageValue is a new slice of column values holding only the age's.
func (s *Schema) ageValue(raw []byte) []Value {
	out := make([]Value, len(s.types))
	if s.age >= 0 {
		var buf [1]Value
		if vs := (Key{kind: ageKey}).readJSON(raw, buf[:0]); len(vs) > 0 {
			out[s.age] = vs[0]
		}
	}
	return out
}

// cellValues fills out, the column values, with the row's cells' but
// the age's, and returns it.
func (s *Schema) cellValues(out []Value, row metav1.TableRow) []Value {
	for i, typ := range s.types {
		if i != s.age && i < len(row.Cells) {
			if v, ok := cellValue(row.Cells[i], typ); ok {
				out[i] = v
			}
		}
	}
	return out
}

// ColumnKey is the key naming a Table column: its name in lower case,
// spaces as hyphens ("Nominated Node" is nominated-node).
func ColumnKey(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), " ", "-")
}

// Columns are the column keys, in the Table's order.
func (s *Schema) Columns() []string { return slices.Clone(s.names) }

func columnType(def metav1.TableColumnDefinition) keyType {
	switch {
	case def.Name == "Age":
		return ageType
	case def.Type == "integer" || def.Type == "number":
		return numberType
	case def.Type == "date" && def.Name == "Created At":
		return timeType
	case def.Type == "date":
		return durationType
	case def.Name == "Ready":
		return fractionType
	case def.Name == "Restarts":
		return restartsType
	}
	return textType
}

// Key is a parsed key: a Table column, the object's namespace, its age,
// or a gjson path.
type Key struct {
	name string
	kind keyKind
	col  int
	typ  keyType
	path string
}

type keyKind uint8

const (
	pathKey keyKind = iota
	columnKey
	nameKey
	namespaceKey
	ageKey
	clusterKey // a question across clusters: cluster.go
)

// String is the key as it was written.
func (k Key) String() string { return k.name }

// Path is the JSON path of a path key, "" for the other keys.
func (k Key) Path() string {
	if k.kind == pathKey {
		return k.path
	}
	return ""
}

// Key parses one key. A name that is a column's key (see ColumnKey) is
// that column; "namespace" and "age" are the object's even where the
// Table has no such column; anything else is a gjson path, as custom
// indexes take them. A leading "." forces a path (".status" is the status
// member, "status" a pod's STATUS column).
func (s *Schema) Key(name string) (Key, error) {
	if name == "" {
		return Key{}, fmt.Errorf("empty key")
	}
	if p, ok := strings.CutPrefix(name, "."); ok {
		if err := indexers.ValidatePath(p); err != nil {
			return Key{}, err
		}
		return Key{name: name, kind: pathKey, path: p}, nil
	}
	lower := strings.ToLower(name)
	if s.across && lower == ClusterKey {
		return Key{name: name, kind: clusterKey, typ: textType}, nil
	}
	if c, ok := s.columns[lower]; ok {
		switch {
		case c.index == 0 && lower == "name":
			return Key{name: name, kind: nameKey, typ: textType}, nil
		case c.typ == ageType:
			return Key{name: name, kind: ageKey, typ: ageType}, nil
		}
		return Key{name: name, kind: columnKey, col: c.index, typ: c.typ}, nil
	}
	switch lower {
	case "namespace":
		return Key{name: name, kind: namespaceKey, typ: textType}, nil
	case "age":
		return Key{name: name, kind: ageKey, typ: ageType}, nil
	case "name":
		return Key{name: name, kind: nameKey, typ: textType}, nil
	}
	if err := indexers.ValidatePath(name); err != nil {
		return Key{}, err
	}
	return Key{name: name, kind: pathKey, path: name}, nil
}

// NeedsCells reports whether reading the key renders the object's Table
// row (the costly part of evaluating a key; see Record).
func (k Key) NeedsCells() bool { return k.kind == columnKey }

// Column is the place of a column key's values among the schema's
// column values (Schema.ColumnValues, Kept.Columns); false for any
// other key.
func (k Key) Column() (int, bool) { return k.col, k.kind == columnKey }

// Record is one object as queries read it: its JSON and, computed on
// first use and kept, its Table cells. A Record is used by one goroutine.
type Record struct {
	Namespace, Name string
	Raw             []byte

	schema *Schema
	now    time.Time
	cols   []Value
	load   func() []Value // nil: ColumnValues
	kept   Kept           // nil: read everything from Raw
}

// Record prepares an object for evaluation at the moment now (ages are
// measured to it).
func (s *Schema) Record(namespace, name string, raw []byte, now time.Time) *Record {
	return &Record{Namespace: namespace, Name: name, Raw: raw, schema: s, now: now}
}

// RecordWith is Record with the column values taken from load, called
// at most once and only if a column is read: a caller that keeps
// ColumnValues per object hands them over.
func (s *Schema) RecordWith(namespace, name string, raw []byte, now time.Time, load func() []Value) *Record {
	return &Record{Namespace: namespace, Name: name, Raw: raw, schema: s, now: now, load: load}
}

func (r *Record) column(i int) Value {
	if r.cols == nil {
		if r.kept != nil {
			r.cols = r.kept.Columns()
		} else if r.load != nil {
			r.cols = r.load()
		} else {
			r.cols = r.schema.ColumnValues(r.Raw, r.now)
		}
	}
	if i < len(r.cols) {
		return r.cols[i]
	}
	return Value{}
}

// Values appends the key's values for r to dst: none when the object
// lacks it, one for a column, as many as a path selects (arrays
// flattened, nulls dropped).
func (k Key) Values(r *Record, dst []Value) []Value {
	switch k.kind {
	case nameKey:
		return append(dst, Text(r.Name))
	case namespaceKey:
		if r.Namespace == "" {
			return dst
		}
		return append(dst, Text(r.Namespace))
	case columnKey:
		if v := r.column(k.col); v.kind != missing {
			return append(dst, v)
		}
		return dst
	case clusterKey:
		return dst // no object holds it: InCluster resolves it first
	}
	if r.kept != nil {
		return append(dst, r.kept.Read(k)...)
	}
	return k.readJSON(r.Raw, dst)
}

// readJSON appends the values of a path or age key read from raw.
func (k Key) readJSON(raw []byte, dst []Value) []Value {
	if k.kind == ageKey {
		ts := gjson.GetBytes(raw, "metadata.creationTimestamp").String()
		t, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			return dst
		}
		return append(dst, Num(float64(-t.Unix())))
	}
	return appendJSON(dst, gjson.GetBytes(raw, k.path))
}

// First is the key's first value for r, Missing when there is none: what
// a sort and a group compare.
func (k Key) First(r *Record) Value {
	var buf [4]Value
	return k.first(r, buf[:0])
}

// first is First with the caller's buffer, which escapes no further.
func (k Key) first(r *Record, buf []Value) Value {
	vs := k.Values(r, buf)
	if len(vs) == 0 {
		return Missing()
	}
	return vs[0]
}

func appendJSON(dst []Value, res gjson.Result) []Value {
	switch res.Type {
	case gjson.Null:
		return dst
	case gjson.Number:
		return append(dst, Num(res.Num))
	case gjson.String:
		return append(dst, Text(res.Str))
	case gjson.True:
		return append(dst, Text("true"))
	case gjson.False:
		return append(dst, Text("false"))
	}
	if res.IsArray() {
		for _, e := range res.Array() {
			dst = appendJSON(dst, e)
		}
		return dst
	}
	return append(dst, Text(res.Raw))
}

// cellValue reads a Table cell as its column's type. A cell the type
// cannot read ("<none>", "<unknown>") is missing.
func cellValue(cell any, typ keyType) (Value, bool) {
	switch c := cell.(type) {
	case nil:
		return Value{}, false
	case int64:
		return Num(float64(c)), true
	case int32:
		return Num(float64(c)), true
	case int:
		return Num(float64(c)), true
	case float64:
		return Num(c), true
	case bool:
		if c {
			return Text("true"), true
		}
		return Text("false"), true
	case string:
		if c == "<none>" || c == "<unknown>" {
			return Value{}, false // what the printers write for no value
		}
		switch typ {
		case numberType:
			f, ok := parseNumber(c)
			return Num(f), ok
		case fractionType:
			f, ok := parseFraction(c)
			return Num(f), ok
		case restartsType:
			f, ok := leadingInt(c)
			return Num(f), ok
		case durationType:
			f, err := parseDuration(c)
			return Num(f), err == nil
		case timeType:
			t, err := time.Parse(time.RFC3339, c)
			return Num(float64(t.Unix())), err == nil
		}
		return Text(c), true
	}
	return Text(fmt.Sprint(cell)), true
}

// readLiteral reads a filter's literal as the key's type asks; an error
// says what the type expects.
func (k Key) readLiteral(raw string, now time.Time) (literal, error) {
	l := literal{raw: raw}
	var ok bool
	switch k.typ {
	case dynamic:
		l.num, l.isNum = parseNumber(raw)
		return l, nil
	case textType:
		return l, nil
	case numberType, restartsType:
		l.num, ok = parseNumber(raw)
		if !ok {
			return l, fmt.Errorf("%q is not a number, as %s needs", raw, k.name)
		}
	case fractionType:
		l.num, ok = parseFraction(raw)
		if !ok {
			return l, fmt.Errorf("%q is not a fraction (such as 2/3) or a number, as %s needs", raw, k.name)
		}
	case ageType, durationType:
		d, err := parseDuration(raw)
		if err != nil {
			return l, fmt.Errorf("%v, as %s needs", err, k.name)
		}
		l.num = d
		if k.typ == ageType {
			// An age's value is minus the creation time (so that a larger
			// age is a larger value): age > d is created before now-d.
			l.num = d - float64(now.Unix())
		}
	case timeType:
		t, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			return l, fmt.Errorf("%q is not a time in RFC 3339 (such as 2024-05-01T10:00:00Z), as %s needs", raw, k.name)
		}
		l.num = float64(t.Unix())
	}
	l.isNum = true
	return l, nil
}
