package indexers

import (
	"net/netip"
	"strings"

	"github.com/tidwall/gjson"
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
	addr, err := netip.ParseAddr(strings.TrimSpace(v))
	if err != nil {
		return "", false
	}
	return addr.WithZone("").Unmap().String(), true
}

// podIPs reads status.podIPs[*].ip and status.podIP. The two usually agree
// (podIP is podIPs[0]); values are deduplicated after normalisation.
func podIPs(raw []byte) []string {
	res := gjson.GetManyBytes(raw, "status.podIP", "status.podIPs.#.ip")
	var out []string
	add := func(v string) {
		ip, ok := NormalizeIP(v)
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
	if res[0].Type == gjson.String {
		add(res[0].Str)
	}
	res[1].ForEach(func(_, v gjson.Result) bool {
		if v.Type == gjson.String {
			add(v.Str)
		}
		return true
	})
	return out
}

// Values are cloned because gjson results share memory with larger buffers,
// and an index keeps its value strings for as long as any object has them.

// owners yields, for every owner reference, its UID and "Kind/name".
func owners(raw []byte) []string {
	var out []string
	gjson.GetBytes(raw, "metadata.ownerReferences").ForEach(func(_, ref gjson.Result) bool {
		if uid := ref.Get("uid").Str; uid != "" {
			out = append(out, strings.Clone(uid))
		}
		kind, name := ref.Get("kind").Str, ref.Get("name").Str
		if kind != "" && name != "" {
			out = append(out, kind+"/"+name)
		}
		return true
	})
	return out
}

// labelValue finds the key by iterating over the labels object rather than
// building a gjson path, so keys with dots and slashes need no escaping.
func labelValue(key string) Func {
	return func(raw []byte) []string {
		var out []string
		gjson.GetBytes(raw, "metadata.labels").ForEach(func(k, v gjson.Result) bool {
			if k.Str == key {
				out = []string{strings.Clone(v.String())}
				return false
			}
			return true
		})
		return out
	}
}

// pathValues flattens whatever the path selects: scalars become their string
// form, arrays are walked recursively, null and missing select nothing,
// objects are indexed by their compact JSON.
func pathValues(path string) Func {
	return func(raw []byte) []string {
		var out []string
		flatten(gjson.GetBytes(raw, path), &out, 0)
		return dedupe(out)
	}
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
