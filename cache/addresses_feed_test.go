package cache

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/ipowner"
)

func podObject(t *testing.T, name, phase string, hostNetwork bool) *Object {
	t.Helper()
	o, err := NewObject(fmt.Appendf(nil, `{"metadata":{"namespace":"shop","name":%q,"uid":"u-%s"},`+
		`"spec":{"nodeName":"node-1","hostNetwork":%t},"status":{"phase":%q,"podIP":"10.0.0.1"}}`,
		name, name, hostNetwork, phase), "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestPodSummary: the summary read through the places Build noted is what
// reading the fields from the whole object gives, for pods shaped every
// way that matters (fields absent, out of order, escaped, not strings).
func TestPodSummary(t *testing.T) {
	objs := []*Object{
		podObject(t, "web-0", "Running", false),
		podObject(t, "done", "Succeeded", false),
		podObject(t, "proxy", "Running", true),
	}
	for _, raw := range []string{
		`{"metadata":{"name":"a"},"status":{"phase":"Fail\u0065d"},"spec":{"hostNetwork":false,"nodeName":"n"}}`,
		`{"metadata":{"name":"b"},"spec":{"nodeName":null,"hostNetwork":"true"}}`,
		`{"metadata":{"name":"c"},"spec":[],"status":{"phase":7}}`,
		`{"metadata":{"name":"d"}}`,
	} {
		o, err := NewObject([]byte(raw), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	list, err := (&listWatch{res: &Resource{Plural: "pods"}, shape: Shape{APIVersion: "v1", Kind: "Pod"}}).
		decodeList(bytes.NewReader(podListFixture(t, 3)))
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, list.Items...)
	for _, o := range objs {
		f := gjson.GetManyBytes(o.Raw(), "status.phase", "spec.nodeName", "spec.hostNetwork")
		want := ipowner.Owner{Kind: ipowner.Pod, Namespace: o.Namespace(), Name: o.Name(), UID: o.UID(),
			Phase: f[0].Str, NodeName: f[1].Str, HostNetwork: f[2].Type == gjson.True}
		got := ipowner.Owner{Kind: ipowner.Pod, Namespace: o.Namespace(), Name: o.Name(), UID: o.UID()}
		if summarisePod(o, &got); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v; expect %+v", o.Raw(), got, want)
		}
	}
}

// TestPodSummariesShareTheirNode: pods on one node keep one copy of its
// name, and of their phase; an interner past its bound starts again and
// still answers the value.
func TestPodSummariesShareTheirNode(t *testing.T) {
	var a, b ipowner.Owner
	summarisePod(podObject(t, "web-0", "Running", false), &a)
	summarisePod(podObject(t, "web-1", "Running", false), &b)
	if a.NodeName == "" || unsafe.StringData(a.NodeName) != unsafe.StringData(b.NodeName) ||
		unsafe.StringData(a.Phase) != unsafe.StringData(b.Phase) {
		t.Errorf("node %q and %q, phase %q and %q: not shared", a.NodeName, b.NodeName, a.Phase, b.Phase)
	}
	in := interner{max: 2}
	for _, v := range []string{`"a"`, `"b"`, `"c"`, `"a"`, `"\u0061"`, `7`, `null`} {
		if got, want := in.intern([]byte(v)), jsonString([]byte(v)); got != want {
			t.Errorf("intern(%s) = %q; expect %q", v, got, want)
		}
	}
	if len(in.seen) > 2 {
		t.Errorf("the interner holds %d values, beyond its bound of 2", len(in.seen))
	}
}
