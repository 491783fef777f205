package indexers

import (
	"bytes"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// Func computes the index values of one stored object from its JSON bytes.
// It is pure, allocation-light and safe to call concurrently. Objects that do
// not have the indexed field yield no values.
type Func func(raw []byte) []string

// Func builds the index function for a valid spec. Call Validate first: an
// invalid spec yields a function that indexes nothing.
func (s Spec) Func() Func {
	s = s.Normalized()
	switch s.Type {
	case PodIP:
		return podIPs
	case NodeName:
		return pathValues("spec.nodeName")
	case Owner:
		return owners
	case Label:
		return labelValue(s.Label)
	case Path:
		return pathValues(s.Path)
	}
	return func([]byte) []string { return nil }
}

// DocFunc computes index values from one member of an object (see
// Spec.Rooted).
type DocFunc func(member jsonscan.Doc) []string

// Rooted returns the top-level member of the object the index reads, and
// the index function over that member: f(value of root) equals
// Func()(object). A cache that knows where an object's metadata, spec and
// status are, and where some of their members are, can then skip straight
// to them. root is "" when the index may read anywhere; f then reads the
// whole object.
func (s Spec) Rooted() (root string, f DocFunc) {
	s = s.Normalized()
	switch s.Type {
	case PodIP:
		return "status", podIPsIn
	case NodeName:
		return "spec", walkValues([]string{"nodeName"})
	case Owner:
		return "metadata", ownersIn
	case Label:
		return "metadata", labelIn(s.Label)
	case Path:
		if steps, ok := plainPath(s.Path); ok && steps[0] != "#" && len(steps) > 1 {
			return steps[0], walkValues(steps[1:])
		}
	}
	whole := s.Func()
	return "", func(d jsonscan.Doc) []string { return whole(d.Bytes()) }
}

// Members returns the members of Rooted's root that its function reads
// when the root is an object: two objects whose roots are objects
// holding these members with the same bytes (or both lacking them) have
// the same values, whatever else differs. nil when the function may read
// any of the root (root "", or not an object). A cache told of an update
// that left them as they were (an annotation's change) then knows the
// values without reading them again.
func (s Spec) Members() []string {
	s = s.Normalized()
	switch s.Type {
	case PodIP:
		return []string{"podIP", "podIPs"}
	case NodeName:
		return []string{"nodeName"}
	case Owner:
		return []string{"ownerReferences"}
	case Label:
		return []string{"labels"}
	case Path:
		if steps, ok := plainPath(s.Path); ok && steps[0] != "#" && len(steps) > 1 {
			return steps[1:2]
		}
	}
	return nil
}

// doc is the Doc of b with nothing known about it.
func doc(b []byte) jsonscan.Doc { return jsonscan.Doc{Raw: b} }

// NormalizeValue turns a value from a query into the form the index stores,
// so that "fd00::0001" finds an object indexed under "fd00::1". ok is false
// when the value can never match (an IP index asked for something that is
// not an IP address).
func (s Spec) NormalizeValue(v string) (norm string, ok bool) {
	if s.Normalized().Type != PodIP {
		return v, true
	}
	return NormalizeIP(v)
}

// NormalizeIP returns the canonical spelling of an IPv4 or IPv6 address:
// IPv6 compressed and lower-case, IPv4-mapped IPv6 unmapped, zone dropped.
func NormalizeIP(v string) (string, bool) {
	v = strings.TrimSpace(v)
	addr, err := netip.ParseAddr(v)
	if err != nil {
		return "", false
	}
	if addr.Is4() {
		return v, true // ParseAddr takes IPv4 only in its canonical spelling
	}
	return addr.WithZone("").Unmap().String(), true
}

// The functions below walk the stored bytes with jsonscan, which skips
// the parts of an object a lookup does not need (managedFields-free pods
// are mostly spec and status strings) faster than gjson (ARCHITECTURE.md,
// "The byte scanner", for the benchmark).
// gjson still evaluates the paths jsonscan does not cover, and is the
// oracle the tests hold these functions to.

// podIPs reads status.podIPs[*].ip and status.podIP. The two usually agree
// (podIP is podIPs[0]); values are deduplicated after normalisation.
func podIPs(raw []byte) []string { return podIPsIn(doc(jsonscan.Member(raw, "status"))) }

// PodIPsOf is the podIP index function over a pod's status.
func PodIPsOf(status jsonscan.Doc) []string { return podIPsIn(status) }

func podIPsIn(status jsonscan.Doc) []string {
	if status.Raw == nil && status.Pieces == nil {
		return nil
	}
	var out []string
	add := func(v []byte) {
		if len(v) == 0 || v[0] != '"' {
			return
		}
		s, err := jsonscan.String(v)
		if err != nil {
			return
		}
		ip, ok := NormalizeIP(s)
		if !ok {
			return
		}
		for _, have := range out {
			if have == ip {
				return
			}
		}
		out = append(out, ip)
	}
	add(status.Member("podIP"))
	jsonscan.Elements(status.Member("podIPs"), func(e []byte) bool {
		add(jsonscan.Member(e, "ip"))
		return true
	})
	return out
}

// Values are cloned (or freshly decoded) because an index keeps its value
// strings for as long as any object has them: one sharing the bytes of a
// stored object would keep that whole object alive.

// owners yields, for every owner reference, its UID and "Kind/name".
func owners(raw []byte) []string { return ownersIn(doc(jsonscan.Member(raw, "metadata"))) }

func ownersIn(metadata jsonscan.Doc) []string {
	var out []string
	refs := metadata.Member("ownerReferences")
	jsonscan.Elements(refs, func(ref []byte) bool {
		str := func(key string) string {
			v := jsonscan.Member(ref, key)
			if len(v) == 0 || v[0] != '"' {
				return ""
			}
			s, _ := jsonscan.String(v)
			return s
		}
		if uid := str("uid"); uid != "" {
			out = append(out, uid)
		}
		if kind, name := str("kind"), str("name"); kind != "" && name != "" {
			out = append(out, kind+"/"+name)
		}
		return true
	})
	return out
}

// labelValue finds the key among the labels' own keys rather than through
// a path, so keys with dots and slashes need no escaping.
func labelValue(key string) Func {
	in := labelIn(key)
	return func(raw []byte) []string { return in(doc(jsonscan.Member(raw, "metadata"))) }
}

func labelIn(key string) DocFunc {
	return func(metadata jsonscan.Doc) []string {
		v := jsonscan.Member(metadata.Member("labels"), key)
		if v == nil {
			return nil
		}
		return []string{scalarString(v)}
	}
}

// scalarString is gjson's String of a value: strings decoded, numbers and
// literals as written (null as ""), objects and arrays as their JSON.
func scalarString(v []byte) string {
	if len(v) > 0 && v[0] == '"' {
		if s, err := jsonscan.String(v); err == nil {
			return s
		}
	}
	return strings.Clone(gjson.ParseBytes(v).String())
}

// pathValues flattens whatever the path selects: scalars become their string
// form, arrays are walked recursively, null and missing select nothing,
// objects are indexed by their compact JSON. Paths of plain keys, array
// positions and # over arrays are walked with jsonscan; any other gjson
// syntax is left to gjson.
func pathValues(path string) Func {
	steps, ok := plainPath(path)
	if !ok {
		return func(raw []byte) []string {
			var out []string
			flatten(gjson.GetBytes(raw, path), &out, 0)
			return dedupe(out)
		}
	}
	f := walkValues(steps)
	return func(raw []byte) []string { return f(doc(raw)) }
}

// walkValues is pathValues for steps plainPath accepted, on a Doc: the
// first step may be a member whose place is known.
func walkValues(steps []string) DocFunc {
	return func(d jsonscan.Doc) []string {
		var out []string
		found := func(v []byte) {
			if plainString(v) { // what gjson answers for it, without its copy of v
				out = append(out, string(v[1:len(v)-1]))
				return
			}
			flatten(gjson.ParseBytes(v), &out, 0)
		}
		if !d.IsObject() {
			walkPath(d.Bytes(), steps, found)
			return dedupe(out)
		}
		buf := joins.Get().(*[]byte)
		v, after := d.MemberIn(*buf, steps[0])
		walkPath(v, steps[1:], found) // as walkPath does for an object; found copies what it keeps
		if cap(after) <= maxJoin {
			*buf = after[:0]
			joins.Put(buf)
		}
		return dedupe(out)
	}
}

// joins are the buffers walkValues joins a member held in pieces into
// (jsonscan.Doc.MemberIn): a pod's containers are held around the name
// of its service account token's volume, and an index reading them runs
// on every event, for the version before and the one after; a join into
// a new slice each time was most of what an event allocated with an
// image index (BENCHMARKS.md, "Where the time goes"). maxJoin bounds the
// buffers kept.
var joins = sync.Pool{New: func() any { return new([]byte) }}

const maxJoin = 256 << 10

// plainPath splits a path made only of keys (letters, digits, '-', '_',
// '/'), array positions and '#' followed by more steps.
func plainPath(path string) ([]string, bool) {
	steps := strings.Split(path, ".")
	for i, s := range steps {
		if s == "" {
			return nil, false
		}
		if s == "#" {
			if i == len(steps)-1 || i == 0 {
				return nil, false // a count, not values
			}
			continue
		}
		for _, c := range []byte(s) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/') {
				return nil, false
			}
		}
	}
	return steps, true
}

// walkPath calls found with each value the steps select from v, in
// document order, as gjson does: a key selects an object member, digits
// also an array element, and # each element of an array.
func walkPath(v []byte, steps []string, found func([]byte)) {
	if len(v) == 0 {
		return
	}
	if len(steps) == 0 {
		found(v)
		return
	}
	step := steps[0]
	switch i := jsonscan.SkipSpace(v, 0); {
	case i < len(v) && v[i] == '{':
		walkPath(jsonscan.Member(v, step), steps[1:], found)
	case i < len(v) && v[i] == '[':
		if step == "#" {
			jsonscan.Elements(v, func(e []byte) bool {
				walkPath(e, steps[1:], found)
				return true
			})
			return
		}
		n, err := strconv.Atoi(step)
		if err != nil || n < 0 {
			return
		}
		jsonscan.Elements(v, func(e []byte) bool {
			if n == 0 {
				walkPath(e, steps[1:], found)
				return false
			}
			n--
			return true
		})
	}
}

// plainString reports whether v is a JSON string without escapes: gjson's
// String of it is its bytes between the quotes, as they are (invalid
// UTF-8 included). Most indexed values (images, names) are such.
func plainString(v []byte) bool {
	return len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v[1:len(v)-1], '\\') < 0
}

// maxDepth bounds recursion on hostile nesting such as [[[[...]]]].
const maxDepth = 16

func flatten(r gjson.Result, out *[]string, depth int) {
	switch {
	case !r.Exists() || r.Type == gjson.Null:
	case r.IsArray():
		if depth >= maxDepth {
			return
		}
		r.ForEach(func(_, v gjson.Result) bool {
			flatten(v, out, depth+1)
			return true
		})
	case r.IsObject():
		*out = append(*out, strings.Clone(r.Raw))
	default:
		*out = append(*out, strings.Clone(r.String()))
	}
}

func dedupe(vs []string) []string {
	if len(vs) < 2 {
		return vs
	}
	out := vs[:0]
	for i, v := range vs {
		dup := false
		for _, w := range vs[:i] {
			if v == w {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, v)
		}
	}
	return out
}
