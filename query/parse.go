package query

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Error is a query parameter that could not be read: which parameter
// (and which of several, for a repeated one), where in its value (a
// 1-based byte position), and what is wrong.
type Error struct {
	Param string
	// Nth is the 1-based occurrence of a repeated parameter; 0 when the
	// parameter was given once.
	Nth int
	Pos int
	Msg string
}

func (e *Error) Error() string {
	param := e.Param
	if e.Nth > 0 {
		param = fmt.Sprintf("%s (occurrence %d)", e.Param, e.Nth)
	}
	if e.Pos > 0 {
		return fmt.Sprintf("%s: at position %d: %s", param, e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s", param, e.Msg)
}

// Op is a filter's comparison.
type Op uint8

const (
	OpExists Op = iota
	OpNotExists
	OpEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
	OpIn
	OpNotIn
	OpContains
)

var opNames = [...]string{"", "!", "=", "!=", "<", "<=", ">", ">=", "in", "notin", "~"}

func (o Op) String() string { return opNames[o] }

// Term is one comparison: key op literal(s).
type Term struct {
	Key  Key
	Op   Op
	lits []literal
}

// Clause is the terms of one filter parameter, ORed.
type Clause []Term

// Filter is every filter parameter's clause, ANDed. The zero Filter
// matches everything.
type Filter []Clause

// SortKey is one key of a sort and its direction.
type SortKey struct {
	Key  Key
	Desc bool
}

// Limits bound what one query may ask for.
const (
	// MaxTerms bounds the terms of all of a query's filters together
	// (each value of an in or notin list counts one): every term is
	// evaluated against every candidate object.
	MaxTerms = 64
	// MaxSortKeys bounds a sort's keys.
	MaxSortKeys = 8
	// MaxFields bounds a projection's paths.
	MaxFields = 64
	// MaxGroupBy is the most keys counts are grouped by.
	MaxGroupBy = 2
)

// ParseFilter reads the filter parameters, each one a comma-separated
// list of terms that are ORed; the parameters are ANDed. now is the
// moment ages are measured to.
//
//	filter = term *( "," term )
//	term   = key                      ; the key has a value
//	       | "!" key                  ; the key has none
//	       | key op value             ; op: = == != < <= > >= ~
//	       | key ws ("in" | "notin") ws* "(" value *( "," value ) ")"
//	value  = bare | quoted            ; quoted: a JSON string
//	bare   = characters up to the next top-level "," (or ")" in a list),
//	         spaces around it trimmed
//
// A key is read up to the first operator character (= ! < > ~), comma
// or space outside brackets, parentheses and quotes, so a gjson path's
// own queries (#(name=="x")) and escapes (app\.kubernetes\.io/name) stay
// in the key.
func (s *Schema) ParseFilter(params []string, now time.Time) (Filter, error) {
	var f Filter
	terms := 0
	for i, p := range params {
		nth := 0
		if len(params) > 1 {
			nth = i + 1
		}
		ps := &parser{s: p, schema: s, now: now, param: "filter", nth: nth}
		c, err := ps.clause()
		if err != nil {
			return nil, err
		}
		for _, t := range c {
			terms += max(1, len(t.lits))
		}
		if terms > MaxTerms {
			return nil, &Error{Param: "filter", Nth: nth, Msg: fmt.Sprintf("the filters have more than %d terms (each value of a list counts one)", MaxTerms)}
		}
		f = append(f, c)
	}
	return f, nil
}

// ParseSort reads sort=key[,key…]; a "-" before a key sorts it
// descending.
func (s *Schema) ParseSort(param string) ([]SortKey, error) {
	if param == "" {
		return nil, nil
	}
	var out []SortKey
	for _, it := range splitList(param) {
		name, desc := strings.CutPrefix(it.s, "-")
		k, err := s.Key(name)
		if err != nil {
			return nil, &Error{Param: "sort", Pos: it.pos + 1 + boolInt(desc), Msg: err.Error()}
		}
		out = append(out, SortKey{Key: k, Desc: desc})
	}
	if len(out) > MaxSortKeys {
		return nil, &Error{Param: "sort", Msg: fmt.Sprintf("at most %d keys", MaxSortKeys)}
	}
	return out, nil
}

// ParseKeys reads a comma-separated list of keys (groupBy, fields): at
// most max of them, each a column or a path (paths only when pathsOnly).
func (s *Schema) ParseKeys(param, value string, maxKeys int, pathsOnly bool) ([]Key, error) {
	if value == "" {
		return nil, nil
	}
	var out []Key
	for _, item := range splitList(value) {
		k, err := s.Key(item.s)
		if err == nil && pathsOnly && k.kind != pathKey {
			err = fmt.Errorf("%q is a column; %s takes JSON paths (write .%s for the member)", item.s, param, item.s)
		}
		if err != nil {
			return nil, &Error{Param: param, Pos: item.pos + 1, Msg: err.Error()}
		}
		out = append(out, k)
	}
	if len(out) > maxKeys {
		return nil, &Error{Param: param, Msg: fmt.Sprintf("at most %d keys, got %d", maxKeys, len(out))}
	}
	return out, nil
}

type item struct {
	s   string
	pos int // 0-based byte offset in the parameter
}

// splitList splits a list of keys at top-level commas (outside
// brackets, parentheses and quotes; not after a backslash).
func splitList(s string) []item {
	var out []item
	start := 0
	sc := scanner{s: s}
	for sc.i < len(s) {
		if s[sc.i] == ',' && sc.depth == 0 && !sc.quoted {
			out = append(out, item{s[start:sc.i], start})
			start = sc.i + 1
		}
		sc.step()
	}
	return append(out, item{s[start:], start})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// scanner walks a key's characters, tracking brackets, quotes and
// backslash escapes as gjson reads them.
type scanner struct {
	s      string
	i      int
	depth  int
	quoted bool
}

func (sc *scanner) step() {
	c := sc.s[sc.i]
	switch {
	case c == '\\':
		sc.i++
	case sc.quoted:
		if c == '"' {
			sc.quoted = false
		}
	case c == '"':
		sc.quoted = true
	case c == '(' || c == '[' || c == '{':
		sc.depth++
	case c == ')' || c == ']' || c == '}':
		if sc.depth > 0 {
			sc.depth--
		}
	}
	sc.i++
}

type parser struct {
	s      string
	i      int
	schema *Schema
	now    time.Time
	param  string
	nth    int
}

func (p *parser) fail(at int, format string, args ...any) error {
	return &Error{Param: p.param, Nth: p.nth, Pos: at + 1, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) spaces() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *parser) clause() (Clause, error) {
	var c Clause
	for {
		t, err := p.term()
		if err != nil {
			return nil, err
		}
		c = append(c, t)
		p.spaces()
		if p.i == len(p.s) {
			return c, nil
		}
		if p.s[p.i] != ',' {
			return nil, p.fail(p.i, "expected \",\" or the end, found %q", p.rest())
		}
		p.i++
	}
}

func (p *parser) rest() string {
	r := p.s[p.i:]
	if len(r) > 20 {
		r = r[:20] + "…"
	}
	return r
}

// key reads a key up to an operator character, a comma or a space at
// the top level.
func (p *parser) key() (Key, int, error) {
	p.spaces()
	start := p.i
	sc := scanner{s: p.s, i: p.i}
	for sc.i < len(p.s) {
		c := p.s[sc.i]
		if sc.depth == 0 && !sc.quoted && strings.IndexByte("=!<>~, ", c) >= 0 {
			break
		}
		sc.step()
	}
	p.i = min(sc.i, len(p.s))
	if p.i == start {
		if p.i == len(p.s) {
			return Key{}, start, p.fail(start, "expected a key, found the end")
		}
		return Key{}, start, p.fail(start, "expected a key, found %q", p.rest())
	}
	k, err := p.schema.Key(p.s[start:p.i])
	if err != nil {
		return Key{}, start, p.fail(start, "%v", err)
	}
	return k, start, nil
}

func (p *parser) term() (Term, error) {
	p.spaces()
	if p.i < len(p.s) && p.s[p.i] == '!' {
		p.i++
		k, _, err := p.key()
		if err != nil {
			return Term{}, err
		}
		return Term{Key: k, Op: OpNotExists}, nil
	}
	k, _, err := p.key()
	if err != nil {
		return Term{}, err
	}
	opAt := p.i
	p.spaces()
	if p.i == len(p.s) || p.s[p.i] == ',' {
		return Term{Key: k, Op: OpExists}, nil
	}
	op, ok := p.op()
	if !ok {
		return Term{}, p.fail(p.i, "expected an operator (= != < <= > >= ~ in notin), found %q", p.rest())
	}
	if op == OpIn || op == OpNotIn {
		if opAt == p.i-len(op.String()) {
			return Term{}, p.fail(opAt, "%s needs a space before it", op)
		}
		lits, err := p.list(k)
		return Term{Key: k, Op: op, lits: lits}, err
	}
	if op == OpContains && k.typ != dynamic && k.typ != textType {
		return Term{}, p.fail(p.i-1, "~ compares text, and %s is a %s key", k.name, k.typ)
	}
	at := p.i
	raw, err := p.value(false)
	if err != nil {
		return Term{}, err
	}
	lit, err := p.literal(k, op, raw, at)
	return Term{Key: k, Op: op, lits: []literal{lit}}, err
}

func (p *parser) literal(k Key, op Op, raw string, at int) (literal, error) {
	if op == OpContains {
		return literal{raw: strings.ToLower(raw)}, nil
	}
	l, err := k.readLiteral(raw, p.now)
	if err != nil {
		return l, p.fail(at, "%v", err)
	}
	return l, nil
}

func (p *parser) op() (Op, bool) {
	r := p.s[p.i:]
	for _, c := range []struct {
		s  string
		op Op
	}{{"!=", OpNe}, {"==", OpEq}, {"<=", OpLe}, {">=", OpGe}, {"=", OpEq}, {"<", OpLt}, {">", OpGt}, {"~", OpContains}} {
		if strings.HasPrefix(r, c.s) {
			p.i += len(c.s)
			return c.op, true
		}
	}
	for _, w := range []struct {
		s  string
		op Op
	}{{"notin", OpNotIn}, {"in", OpIn}} {
		if rest, ok := strings.CutPrefix(r, w.s); ok && (strings.HasPrefix(strings.TrimLeft(rest, " "), "(")) {
			p.i += len(w.s)
			return w.op, true
		}
	}
	return 0, false
}

func (p *parser) list(k Key) ([]literal, error) {
	p.spaces()
	if p.i == len(p.s) || p.s[p.i] != '(' {
		return nil, p.fail(p.i, "expected \"(\" to open the list")
	}
	p.i++
	var lits []literal
	for {
		p.spaces()
		at := p.i
		raw, err := p.value(true)
		if err != nil {
			return nil, err
		}
		lit, err := p.literal(k, OpEq, raw, at)
		if err != nil {
			return nil, err
		}
		lits = append(lits, lit)
		if p.i == len(p.s) {
			return nil, p.fail(p.i, "the list is not closed with \")\"")
		}
		c := p.s[p.i]
		p.i++
		if c == ')' {
			return lits, nil
		}
	}
}

// value reads a bare or quoted value; in a list, ")" ends it too.
func (p *parser) value(inList bool) (string, error) {
	p.spaces()
	if p.i < len(p.s) && p.s[p.i] == '"' {
		start := p.i
		end := start + 1
		for end < len(p.s) && p.s[end] != '"' {
			if p.s[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(p.s) {
			return "", p.fail(start, "the quoted value is not closed")
		}
		v, err := strconv.Unquote(p.s[start : end+1])
		if err != nil {
			return "", p.fail(start, "the quoted value is not a valid string: %v", err)
		}
		p.i = end + 1
		p.spaces()
		if p.i < len(p.s) && p.s[p.i] != ',' && !(inList && p.s[p.i] == ')') {
			return "", p.fail(p.i, "expected \",\" after the quoted value, found %q", p.rest())
		}
		return v, nil
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ',' && !(inList && p.s[p.i] == ')') {
		p.i++
	}
	return strings.TrimRight(p.s[start:p.i], " "), nil
}
