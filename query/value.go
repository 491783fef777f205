package query

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unique"
)

// Value is one value of a key for one object: missing, a number or text.
// Typed columns (numbers, fractions, restarts, ages, times) are numbers;
// a JSON path's values are numbers when JSON says so and text otherwise
// (strings as they are, true/false, objects and arrays as their JSON).
type Value struct {
	kind valueKind
	num  float64
	str  string
}

type valueKind uint8

const (
	missing valueKind = iota
	number
	text
)

// Interned is v with its text, if any, shared with every equal text
// interned (unique.Make): values kept for many objects take the memory of
// their distinct texts once, and comparing them reads memory already at
// hand.
func (v Value) Interned() Value {
	if v.kind == text {
		v.str = unique.Make(v.str).Value()
	}
	return v
}

// AsText is the value's text, and false when it is not a text.
func (v Value) AsText() (string, bool) { return v.str, v.kind == text }

// Num and Text make values; Missing is the value of a key an object lacks.
func Num(f float64) Value       { return Value{kind: number, num: f} }
func Text(s string) Value       { return Value{kind: text, str: s} }
func Missing() Value            { return Value{} }
func (v Value) IsMissing() bool { return v.kind == missing }

// String is the value as a group's key shows it: numbers in their
// shortest spelling, missing as "".
func (v Value) String() string {
	switch v.kind {
	case number:
		return strconv.FormatFloat(v.num, 'f', -1, 64)
	case text:
		return v.str
	}
	return ""
}

// Compare orders two values: numbers before text, text by bytes, and
// missing after everything (in both directions of a sort: see Sort).
func Compare(a, b Value) int {
	if a.kind != b.kind {
		return cmp.Compare(rank(a.kind), rank(b.kind))
	}
	switch a.kind {
	case number:
		return cmp.Compare(a.num, b.num)
	case text:
		return strings.Compare(a.str, b.str)
	}
	return 0
}

func rank(k valueKind) int {
	switch k {
	case number:
		return 0
	case text:
		return 1
	}
	return 2
}

// literal is a value written in a filter, read as the key's type asks.
type literal struct {
	raw string
	num float64
	// isNum: raw reads as a number of the key's type (always, for typed
	// keys; when it parses, for paths).
	isNum bool
}

// parseDuration reads an age as kubectl prints one or as a person writes
// one: a sequence of a whole number and a unit (s, m, h, d, y), such as
// 90s, 5m, 3d4h or 2y; Go's fractional spellings (1.5h, 300ms) too. It
// returns seconds.
func parseDuration(s string) (float64, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d.Seconds(), nil
	}
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	total := 0.0
	for rest := s; rest != ""; {
		i := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsDigit(r) })
		if i <= 0 || i == len(rest) {
			return 0, fmt.Errorf("%q is not a duration (such as 90s, 5m, 3d4h, 2y)", s)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (such as 90s, 5m, 3d4h, 2y)", s)
		}
		var unit float64
		switch rest[i] {
		case 's':
			unit = 1
		case 'm':
			unit = 60
		case 'h':
			unit = 3600
		case 'd':
			unit = 86400
		case 'y':
			unit = 365 * 86400
		default:
			return 0, fmt.Errorf("%q is not a duration (such as 90s, 5m, 3d4h, 2y)", s)
		}
		total += n * unit
		rest = rest[i+1:]
	}
	return total, nil
}

// parseFraction reads "2/3" (what a Ready column prints) as 2/3, and a
// plain number as itself. A fraction with a zero denominator ("0/0") is 0.
func parseFraction(s string) (float64, bool) {
	num, den, ok := strings.Cut(s, "/")
	if !ok {
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	a, err1 := strconv.ParseUint(strings.TrimSpace(num), 10, 32)
	b, err2 := strconv.ParseUint(strings.TrimSpace(den), 10, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	if b == 0 {
		return 0, true
	}
	return float64(a) / float64(b), true
}

// parseNumber reads a finite decimal number.
func parseNumber(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// leadingInt reads the number a Restarts cell starts with ("3 (5m ago)").
func leadingInt(s string) (float64, bool) {
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[:i]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return float64(n), err == nil
}

// MarshalJSON writes a number as a JSON number, text as a string and a
// missing value as null.
func (v Value) MarshalJSON() ([]byte, error) {
	switch v.kind {
	case number:
		return strconv.AppendFloat(nil, v.num, 'f', -1, 64), nil
	case text:
		return json.Marshal(v.str)
	}
	return []byte("null"), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (v *Value) UnmarshalJSON(b []byte) error {
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	switch t := x.(type) {
	case nil:
		*v = Missing()
	case float64:
		*v = Num(t)
	case string:
		*v = Text(t)
	default:
		return fmt.Errorf("a query value is a number, a string or null")
	}
	return nil
}
