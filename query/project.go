package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Projection keeps only some paths of an object, plus what identifies
// it: kind, apiVersion and metadata's name, namespace, uid and
// resourceVersion. A Projection is immutable and safe for concurrent use.
type Projection struct {
	root *node
	// columns are the Table columns asked for (project_columns.go), read
	// through schema's Table at now.
	columns []projColumn
	schema  *Schema
	now     time.Time
}

// node is a member of the projected object: a path kept whole (leaf) or
// an object of some of its members.
type node struct {
	name     string
	leaf     bool
	children []*node
}

// identity is what every projected object keeps.
var identity = []string{"kind", "apiVersion", "metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion"}

// ParseFields reads fields=path[,path…]: plain member paths (names
// separated by dots, with gjson's backslash escapes), so that the
// projected object has the shape of the original.
func ParseFields(value string) (*Projection, error) {
	if value == "" {
		return nil, nil
	}
	p := &Projection{root: &node{}}
	for _, id := range identity {
		p.add(strings.Split(id, "."))
	}
	items := splitList(value)
	if len(items) > MaxFields {
		return nil, &Error{Param: "fields", Msg: fmt.Sprintf("at most %d paths, got %d", MaxFields, len(items))}
	}
	for _, it := range items {
		segs, err := memberPath(strings.TrimPrefix(it.s, "."))
		if err != nil {
			return nil, &Error{Param: "fields", Pos: it.pos + 1, Msg: err.Error()}
		}
		p.add(segs)
	}
	return p, nil
}

// memberPath splits a plain path into member names, unescaping them.
func memberPath(path string) ([]string, error) {
	if path == "" {
		return nil, fmt.Errorf("empty path")
	}
	var segs []string
	var cur strings.Builder
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '\\' && i+1 < len(path):
			i++
			cur.WriteByte(path[i])
		case c == '.':
			if cur.Len() == 0 {
				return nil, fmt.Errorf("path %q has an empty member", path)
			}
			segs = append(segs, cur.String())
			cur.Reset()
		case strings.IndexByte("#*?|@()[]{}\"!=<>~, \\", c) >= 0:
			return nil, fmt.Errorf("path %q: fields takes plain member paths (a.b.c, with \\. for a dot in a name); %q is not allowed", path, c)
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() == 0 {
		return nil, fmt.Errorf("path %q has an empty member", path)
	}
	return append(segs, cur.String()), nil
}

func (p *Projection) add(segs []string) {
	n := p.root
	for i, s := range segs {
		var child *node
		for _, c := range n.children {
			if c.name == s {
				child = c
			}
		}
		if child == nil {
			child = &node{name: s}
			n.children = append(n.children, child)
		}
		if child.leaf {
			return // a shorter path keeps the whole member already
		}
		if i == len(segs)-1 {
			child.leaf, child.children = true, nil
		}
		n = child
	}
}

// Apply appends the projection of the JSON object raw to dst. Members
// the object lacks are left out, as are objects left empty.
func (p *Projection) Apply(dst, raw []byte) []byte {
	start := len(dst)
	out, ok := p.root.appendTo(dst, gjson.ParseBytes(raw))
	if ok && len(p.columns) > 0 {
		out = p.appendColumns(out, start, raw)
	}
	return out
}

func (n *node) appendTo(dst []byte, obj gjson.Result) ([]byte, bool) {
	if !obj.IsObject() {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, '{')
	any := false
	for _, c := range n.children {
		v := obj.Get(escape(c.name))
		if !v.Exists() {
			continue
		}
		mark := len(dst)
		if any {
			dst = append(dst, ',')
		}
		name, _ := json.Marshal(c.name)
		dst = append(append(dst, name...), ':')
		if c.leaf {
			dst = append(dst, compact(v.Raw)...)
		} else {
			var ok bool
			if dst, ok = c.appendTo(dst, v); !ok {
				dst = dst[:mark]
				continue
			}
		}
		any = true
	}
	if !any && n.name != "" {
		return dst[:start], false
	}
	return append(dst, '}'), true
}

// escape makes a member name a one-member gjson path.
func escape(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if strings.IndexByte(".*?|#@\\!=<>%", name[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	return b.String()
}

// compact drops insignificant white space from stored JSON (which is
// compact already, as the cache keeps it; this is a guard for tests).
func compact(raw string) []byte {
	if !strings.ContainsAny(raw, " \n\t\r") {
		return []byte(raw)
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(raw)) != nil {
		return []byte(raw)
	}
	return b.Bytes()
}
