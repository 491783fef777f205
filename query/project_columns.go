package query

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/util/duration"
)

// ColumnsMember is the member of a projected item that holds the Table
// columns fields= asked for, by key: {"restarts":"3 (5m ago)","ready":"1/1"}.
// It is a member of the item, beside the object's own projected members,
// so a row of a table reads from one object; it cannot collide with the
// object's own member of that name because a projection that asks for
// columns refuses to keep that member (ParseFields).
const ColumnsMember = "columns"

// projColumn is a column a projection adds: its key as the answer names
// it and how its value is read.
type projColumn struct {
	name string
	kind keyKind // columnKey (cell index col), nameKey, namespaceKey or ageKey
	col  int
}

// ParseFields reads fields=key[,key…] for the resource s describes: each
// key is a Table column (as filter and sort take them: lower case, spaces
// as hyphens; and name, namespace and age for every resource), whose
// value as kubectl prints it goes under ColumnsMember, or a plain member
// path (a leading "." forces a path where a column has the same name:
// .status is the member, status a pod's STATUS column). now is the moment
// ages are printed at.
func (s *Schema) ParseFields(value string, now time.Time) (*Projection, error) {
	if value == "" {
		return nil, nil
	}
	items := splitList(value)
	if len(items) > MaxFields {
		return nil, &Error{Param: "fields", Msg: fmt.Sprintf("at most %d keys, got %d", MaxFields, len(items))}
	}
	p := &Projection{root: &node{}, schema: s, now: now}
	for _, id := range identity {
		p.add(strings.Split(id, "."))
	}
	ownColumns := 0 // the position of a path into the object's own ColumnsMember
	for _, it := range items {
		if c, ok := s.fieldColumn(it.s); ok {
			if !slices.ContainsFunc(p.columns, func(have projColumn) bool { return have.name == c.name }) {
				p.columns = append(p.columns, c)
			}
			continue
		}
		segs, err := memberPath(strings.TrimPrefix(it.s, "."))
		if err != nil {
			return nil, &Error{Param: "fields", Pos: it.pos + 1, Msg: err.Error()}
		}
		if segs[0] == ColumnsMember && ownColumns == 0 {
			ownColumns = it.pos + 1
		}
		p.add(segs)
	}
	if len(p.columns) > 0 && ownColumns > 0 {
		return nil, &Error{Param: "fields", Pos: ownColumns, Msg: fmt.Sprintf("the object's own %q member cannot be kept beside Table columns, which the answer puts under that name",
			ColumnsMember)}
	}
	return p, nil
}

// fieldColumn reads a fields= item as a column, if it is one.
func (s *Schema) fieldColumn(item string) (projColumn, bool) {
	if strings.HasPrefix(item, ".") {
		return projColumn{}, false
	}
	lower := strings.ToLower(item)
	if c, ok := s.columns[lower]; ok {
		return projColumn{name: lower, kind: columnKey, col: c.index}, true
	}
	switch lower {
	case "name":
		return projColumn{name: lower, kind: nameKey}, true
	case "namespace":
		return projColumn{name: lower, kind: namespaceKey}, true
	case "age":
		return projColumn{name: lower, kind: ageKey}, true
	}
	return projColumn{}, false
}

// appendColumns appends ,"columns":{…} before the closing brace of the
// projected object at dst[start:]. A row that cannot be rendered gives
// null cells, as the key's value is then unknown.
func (p *Projection) appendColumns(dst []byte, start int, raw []byte) []byte {
	var cells []any
	if slices.ContainsFunc(p.columns, func(c projColumn) bool { return c.kind == columnKey }) {
		if row, err := p.schema.conv.Row(raw, p.now); err == nil {
			cells = row.Cells
		}
	}
	dst = dst[:len(dst)-1] // the object's '}'
	if len(dst) > start+1 {
		dst = append(dst, ',')
	}
	dst = append(dst, `"`+ColumnsMember+`":{`...)
	for i, c := range p.columns {
		if i > 0 {
			dst = append(dst, ',')
		}
		name, _ := json.Marshal(c.name)
		dst = append(append(dst, name...), ':')
		var v any
		switch c.kind {
		case columnKey:
			if c.col < len(cells) {
				v = cells[c.col]
			}
		case nameKey:
			v = gjson.GetBytes(raw, "metadata.name").String()
		case namespaceKey:
			if ns := gjson.GetBytes(raw, "metadata.namespace"); ns.Exists() {
				v = ns.String()
			}
		case ageKey:
			if t, err := time.Parse(time.RFC3339, gjson.GetBytes(raw, "metadata.creationTimestamp").String()); err == nil {
				v = duration.HumanDuration(p.now.Sub(t))
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte("null")
		}
		dst = append(dst, b...)
	}
	return append(dst, "}}"...)
}
