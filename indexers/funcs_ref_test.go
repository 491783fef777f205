package indexers

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// The index functions as they were first written, entirely with gjson:
// the oracle the jsonscan versions are held to.

// refPodIPs reads status.podIPs[*].ip and status.podIP. The two usually agree
// (podIP is podIPs[0]); values are deduplicated after normalisation.
func refPodIPs(raw []byte) []string {
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

// refOwners yields, for every owner reference, its UID and "Kind/name".
func refOwners(raw []byte) []string {
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

// refLabelValue finds the key by iterating over the labels object rather than
// building a gjson path, so keys with dots and slashes need no escaping.
func refLabelValue(key string) Func {
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

// refPathValues flattens whatever the path selects: scalars become their string
// form, arrays are walked recursively, null and missing select nothing,
// objects are indexed by their compact JSON.
func refPathValues(path string) Func {
	return func(raw []byte) []string {
		var out []string
		flatten(gjson.GetBytes(raw, path), &out, 0)
		return dedupe(out)
	}
}

// refFunc is Spec.Func with the gjson functions.
func refFunc(s Spec) Func {
	s = s.Normalized()
	switch s.Type {
	case PodIP:
		return refPodIPs
	case NodeName:
		return refPathValues("spec.nodeName")
	case Owner:
		return refOwners
	case Label:
		return refLabelValue(s.Label)
	case Path:
		return refPathValues(s.Path)
	}
	return nil
}

// sameAsReference fails when a spec's function and the gjson reference
// disagree on obj.
func sameAsReference(t *testing.T, s Spec, obj []byte) {
	t.Helper()
	got, want := s.Func()(obj), refFunc(s)(obj)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s on %s:\n got %q\nwant %q (gjson)", s, obj, got, want)
	}
	if root, f := s.Rooted(); root != "" {
		if got := f(jsonscan.Doc{Raw: jsonscan.Member(obj, root)}); !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
			t.Fatalf("%s rooted at %s on %s:\n got %q\nwant %q (gjson)", s, root, obj, got, want)
		}
		sameFromMembers(t, s, obj)
	}
}

// sameFromMembers fails when a spec's rooted function reads more of an
// object root than Members says: a root holding only those members (in
// the other order, after a member of another name) must have the values
// of the whole root.
func sameFromMembers(t *testing.T, s Spec, obj []byte) {
	t.Helper()
	root, f := s.Rooted()
	members := s.Members()
	whole := jsonscan.Doc{Raw: jsonscan.Member(obj, root)}
	if members == nil || !whole.IsObject() {
		return
	}
	b := []byte(`{"zz-other":[1,{"a":"b"}]`)
	for i := len(members) - 1; i >= 0; i-- {
		if v := whole.Member(members[i]); v != nil {
			b = fmt.Appendf(b, `,%q:%s`, members[i], v)
		}
	}
	b = append(b, '}')
	got, want := f(jsonscan.Doc{Raw: b}), f(whole)
	if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
		t.Fatalf("%s rooted at %s on %s: from its members %v only (%s) got %q, want %q", s, root, obj, members, b, got, want)
	}
}

var referenceSpecs = []Spec{
	{Name: "ip", Type: PodIP}, {Name: "o", Type: Owner}, {Name: "l", Label: "app"},
	{Name: "dots", Label: "app.kubernetes.io/name"}, {Name: "n", Type: NodeName},
	{Name: "img", Path: "spec.containers.#.image"}, {Name: "first", Path: "spec.containers.0.name"},
	{Name: "ports", Path: "spec.containers.#.ports.#.containerPort"}, {Name: "obj", Path: "metadata.labels"},
	{Name: "q", Path: `spec.containers.#(name=="app").image`},
}

func TestFuncsMatchGJSON(t *testing.T) {
	docs := []string{pod,
		`{"status":{"podIP":"10.0.0.1","podIPs":[{"ip":"10.0.0.1"},{"ip":"fd00::01"},{"ip":7},{}]}}`,
		`{"status":{"podIP":"10.0.0.9","podIPs":[{"ip":"10.0.0.1"}]}}`,
		`{"metadata":{"labels":{"app":"a\u0062c","app.kubernetes.io/name":3},"ownerReferences":[{"uid":"u","kind":"K","name":"n"},{"kind":"K"},5]}}`,
		`{"metadata":{"labels":{"ap\u0070":"escaped-key"}}}`,
		`{"spec":{"containers":[{"image":"a","ports":[{"containerPort":80},{"containerPort":1.5}]},{"image":["x",["y"]]},{"image":null},{"name":"app","image":{"b":1}}]}}`,
		`{"spec":{"containers":{"0":{"name":"objkey"}}}}`,
		`{"spec":{"nodeName":true}}`, `[]`, `{}`, `{"status":[1]}`,
	}
	for _, d := range docs {
		for _, s := range referenceSpecs {
			sameAsReference(t, s, []byte(d))
		}
	}
}

func FuzzFuncsMatchGJSON(f *testing.F) {
	f.Add([]byte(pod), "spec.containers.#.image")
	f.Add([]byte(`{"a":[{"b":[1,2]},{"b":3}]}`), "a.#.b")
	f.Add([]byte(`{"a":{"0":1},"b":[[1],[2]]}`), "b.1.0")
	f.Fuzz(func(t *testing.T, obj []byte, path string) {
		// The cache stores only JSON objects.
		if !gjson.ValidBytes(obj) || !gjson.ParseBytes(obj).IsObject() || strings.Contains(string(obj), `\u0000`) {
			return
		}
		for _, s := range referenceSpecs[:5] {
			sameAsReference(t, s, obj)
		}
		if ValidatePath(path) == nil {
			sameAsReference(t, Spec{Name: "p", Path: path}, obj)
		}
	})
}
