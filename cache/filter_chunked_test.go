package cache

import (
	"encoding/json"
	"os"
	"runtime"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeindex/kubeindex/indexers"
)

// TestChunkedObjectFiltersAsItsWholeBytes: a pod held in pieces (its
// containers and volumes shared chunks) is selected by every label
// selector and index value exactly as the same pod stored whole, with
// facts shared across filters (a publish) and without (a list), and
// through indexes that read one member and the whole object alike.
func TestChunkedObjectFiltersAsItsWholeBytes(t *testing.T) {
	pod, s, o := chunkedTestPod(t)
	whole := inline(t, s, pod)

	// The reference reads the whole bytes with gjson and the index's
	// Func, as nothing in the filter does.
	var podLabels labels.Set
	if err := json.Unmarshal([]byte(gjson.GetBytes(whole.Raw(), "metadata.labels").Raw), &podLabels); err != nil || len(podLabels) == 0 {
		t.Fatalf("the pod's labels %v: %v", podLabels, err)
	}
	var filters []*filter
	var specOf []indexers.Spec // filters[i]'s index; zero: none
	for _, sel := range []string{"app=auth-0", "app=auth-1", "tier in (backend),version=v1.42.0", "!missing", "missing",
		"app.kubernetes.io/part-of=shop,tier!=backend", "kubeindex.bench/pod"} {
		ls, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		filters = append(filters, &filter{selector: ls, multi: manyRequirements(ls)})
		specOf = append(specOf, indexers.Spec{})
	}
	specs := []indexers.Spec{{Name: "ip", Type: indexers.PodIP}, {Name: "node", Type: indexers.NodeName}, {Name: "owner", Type: indexers.Owner},
		{Name: "app", Label: "app"}, {Name: "image", Path: "spec.containers.#.image"},
		{Name: "second", Path: "spec.containers.1.image"}, {Name: "anywhere", Path: `spec.containers.#(name=="envoy").image`}}
	for _, spec := range specs {
		if err := spec.Validate(); err != nil {
			t.Fatalf("%+v: %v", spec, err)
		}
		root, _ := spec.Rooted()
		values := spec.Func()(whole.Raw())
		if len(values) == 0 {
			t.Fatalf("index %s (root %q) has no value for the pod", spec.Name, root)
		}
		for _, v := range append(values, "none") {
			f := &filter{}
			f.setIndex(spec, v)
			filters = append(filters, f)
			ls, _ := labels.Parse("tier=backend")
			g := &filter{selector: ls}
			g.setIndex(spec, v)
			filters = append(filters, g)
			specOf = append(specOf, spec, spec)
		}
	}
	in, shared, wholeShared := 0, &facts{}, &facts{}
	for i, f := range filters {
		want := f.selector == nil || f.selector.Matches(podLabels)
		if specOf[i].Name != "" {
			want = want && slices.Contains(specOf[i].Func()(whole.Raw()), f.value)
		}
		if want {
			in++
		}
		if got, w := f.matches(o, &facts{}), f.matches(whole, &facts{}); got != want || w != want {
			t.Errorf("filter %d (%v, index %s=%s): the pieces %v, the whole %v, want %v", i, f.selector, f.index, f.value, got, w, want)
		}
		if got, w := f.matches(o, shared), f.matches(whole, wholeShared); got != want || w != want {
			t.Errorf("filter %d (%v, index %s=%s) with shared facts: the pieces %v, the whole %v, want %v", i, f.selector, f.index, f.value, got, w, want)
		}
		if got := f.selects(o) && f.hasIndexValue(o); got != want {
			t.Errorf("filter %d (%v, index %s=%s): selects the pieces %v, want %v", i, f.selector, f.index, f.value, got, want)
		}
	}
	if in == 0 || in == len(filters) {
		t.Fatalf("%d of %d filters select the pod: the test tells nothing", in, len(filters))
	}
}

// BenchmarkFilterChunkedPod: a subscription's label selector and index
// value asked of a pod held in pieces, as the fan-out asks each event
// (matches, facts per event) and a list each candidate (selects).
//
//	go test -run XXX -bench FilterChunkedPod -benchmem ./cache
func BenchmarkFilterChunkedPod(b *testing.B) {
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		b.Fatal(err)
	}
	s := Shape{APIVersion: "v1", Kind: "Pod"}
	first, _ := s.Build(pod)
	o, err := s.Build(pod)
	runtime.KeepAlive(first)
	if err != nil || !o.Chunked() {
		b.Fatalf("the pod is not held in pieces (%v)", err)
	}
	sel, _ := labels.Parse("app=auth-0")
	multi, _ := labels.Parse("app=auth-0,tier=backend")
	node := &filter{}
	node.setIndex(indexers.Spec{Name: "node", Type: indexers.NodeName}, "ip-10-0-0-3.ec2.internal")
	app := &filter{}
	app.setIndex(indexers.Spec{Name: "app", Label: "app"}, "auth-0")
	for _, c := range []struct {
		name string
		f    *filter
	}{{"selector", &filter{selector: sel}}, {"selector of two", &filter{selector: multi, multi: true}}, {"node index", node}, {"label index", app}} {
		b.Run(c.name+" event", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !c.f.matches(o, &facts{}) {
					b.Fatal("not selected")
				}
			}
		})
		b.Run(c.name+" candidate", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !c.f.selects(o) {
					b.Fatal("not selected")
				}
			}
		})
	}
}

// TestChunkedPodIndexValuesJoinIntoAReusedBuffer: an index walking a
// member held in pieces (the image path over a pod's containers, held
// around the name of its token volume) gives the values of the pod
// stored whole, and joins the pieces into a buffer it reuses: the index
// runs on every event, for the version before and the one after, and a
// new join each time was most of what an event allocated with such an
// index (BenchmarkUpkeep).
func TestChunkedPodIndexValuesJoinIntoAReusedBuffer(t *testing.T) {
	pod, s, o := chunkedTestPod(t)
	spec := indexers.Spec{Name: "image", Path: "spec.containers.#.image"}
	root, f := spec.Rooted()
	d := o.doc(root)
	if _, joined := d.MemberIn(nil, "containers"); len(joined) == 0 {
		t.Fatal("the pod's containers are not held in several pieces: nothing to join")
	}
	containers := len(gjson.GetBytes(pod, "spec.containers").Raw)
	want := spec.Func()(inline(t, s, pod).Raw())
	if got := o.indexValues(root, f); len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("values %q, want %q", got, want)
	}
	// Under the race detector a sync.Pool drops a quarter of what is put
	// in it, by design, and a call allocates up to about the containers'
	// size; a join into new memory per call, growing as it appends, about
	// three times it. The bound lies between, so that make test, which
	// runs under the race detector, checks it too.
	const runs = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		o.indexValues(root, f)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > uint64(containers)*3/2 {
		t.Errorf("%d bytes allocated per call, the containers being %d: their pieces are joined into new memory", per, containers)
	}
}

// chunkedTestPod is testdata/pod.json, its shape, and the pod built a
// second time, which holds it in pieces (the first sight makes the
// chunks).
func chunkedTestPod(t *testing.T) ([]byte, Shape, *Object) {
	t.Helper()
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	s := Shape{APIVersion: "v1", Kind: "Pod"}
	first, err := s.Build(pod)
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.Build(pod)
	runtime.KeepAlive(first)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Chunked() {
		t.Fatal("the pod is not held in pieces")
	}
	return pod, s, o
}
