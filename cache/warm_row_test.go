package cache

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestWarmedPodRowsReadAsThePods: the values the warmer keeps of a pod,
// whose row it reads from a copy of the pod with stand-ins for its
// labels, annotations, owner references and containers (warm_row.go),
// are those of the pod's own row: for pods whose containers share their
// chunks, their first chunks or none, differ in their token volume's
// name (own bytes between chunks), in their number (a container added
// after the last token volume's name: the same first chunks), hold a
// null, a name with a backslash, or something the scan does not read
// (then the pod's row, not the copy's: a pod whose name the scan leaves
// to decode and whose labels only the copy would let decode read), in
// whatever order the worker meets them.
func TestWarmedPodRowsReadAsThePods(t *testing.T) {
	tmpl, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	const token = "kube-api-access-447rs"
	base := string(tmpl)
	for _, s := range []string{token, `"containers":[{`, `}],"restartPolicy"`, `"labels":{`, `"name":"auth-0-b183731b00-00301"`} {
		if !strings.Contains(base, s) {
			t.Fatalf("testdata/pod.json no longer has %s", s)
		}
	}
	lastContainerEnd := strings.LastIndex(base, `}],"restartPolicy"`)
	variants := map[string]func(string, int) string{
		"base": func(p string, _ int) string { return p },
		"token": func(p string, i int) string {
			return strings.ReplaceAll(p, token, fmt.Sprintf("kube-api-access-t%04d", i))
		},
		"extra": func(p string, _ int) string { // a third container: the first chunks are base's
			return p[:lastContainerEnd] + `},{"name":"extra","image":"registry.example.com/extra:v1"` + p[lastContainerEnd:]
		},
		"null": func(p string, _ int) string {
			return strings.Replace(p, `"containers":[{`, `"containers":[null,{`, 1)
		},
		"backslash": func(p string, i int) string { // own bytes between chunks with a backslash
			return strings.ReplaceAll(p, token, fmt.Sprintf(`kube-api-access-a\\%04d`, i))
		},
		"labels": func(p string, _ int) string {
			return strings.Replace(p, `"labels":{`, `"labels":{"extra":"[{\"x\":1}]",`, 1)
		},
		"not-objects": func(p string, _ int) string { // the scan does not read it, nor decode
			return strings.Replace(p, `"containers":[{`, `"containers":[7,{`, 1)
		},
		"decoded": func(p string, _ int) string { // only decode reads the name; it refuses the labels, which the copy leaves out
			p = strings.Replace(p, `"labels":{`, `"labels":{"a" "b",`, 1)
			return strings.Replace(p, `"name":"auth-0-b183731b00-00301"`, `"name":"auth\u002d0-b183731b00-00301"`, 1)
		},
	}
	names := slices.Sorted(maps.Keys(variants))
	var list strings.Builder
	list.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"900"},"items":[`)
	pods := 0
	for _, name := range names {
		for i := range 3 { // a chunk is made of content met twice
			if pods > 0 {
				list.WriteByte(',')
			}
			p := variants[name](base, i)
			p = strings.Replace(p, `-b183731b00-00301"`, fmt.Sprintf(`-b183731b00-%s-%d"`, name, i), 1)
			p = strings.ReplaceAll(p, "491617ca-b0ec-431b-96b1-61298f5b0740", fmt.Sprintf("491617ca-b0ec-431b-96b1-%012x", pods))
			list.WriteString(p)
			pods++
		}
	}
	list.WriteString(`]}`)
	srv := listServer(t, []byte(list.String()))
	c, stop := startSyncedPods(t, &rest.Config{Host: srv.URL, DisableCompression: true}, Spec{Resource: "pods"},
		Options{LazyColumns: true}, pods)
	defer stop()
	r := c.byName["pods"]
	sc := r.columnSchema()
	objs := r.objects()
	if len(objs) != pods {
		t.Fatalf("%d pods cached; expect %d", len(objs), pods)
	}

	// The copies stand in for what they should, and their rows are read
	// by the scan (but the pods it leaves to decode).
	var pr podRows
	var scratch []byte
	copied := 0
	for _, o := range objs {
		cp, ok := pr.copyOf(o, &scratch)
		if !ok {
			continue
		}
		copied++
		want := sc.ColumnValues(o.Raw(), time.Now())
		got, read := sc.ScannedColumnValues(cp, time.Now())
		scanned := !strings.Contains(o.Name(), "decoded") && !strings.Contains(o.Name(), "not-objects")
		if read != scanned {
			t.Errorf("%s: its copy read by the scan: %v; expect %v", o.Key(), read, scanned)
		}
		if read && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the copy's values %v; the pod's %v", o.Key(), got, want)
		}
		if len(cp) > o.Len()-2000 { // the containers alone are 2.7 KB
			t.Errorf("%s: the copy is %d of the pod's %d bytes", o.Key(), len(cp), o.Len())
		}
	}
	if copied != pods-3 {
		t.Errorf("%d of %d pods read from a copy; expect all but those whose containers the scan does not read", copied, pods)
	}
	if len(pr.read) < 3 {
		t.Errorf("the containers of %d sets of chunks read once; expect those of base, extra and null at least", len(pr.read))
	}

	// The warmer's worker keeps the pods' own values, whichever pods it
	// meets first.
	for _, order := range []string{"listed", "reversed", "interleaved"} {
		for _, o := range objs {
			o.columns.Store(nil)
		}
		in := slices.Clone(objs)
		switch order {
		case "reversed":
			slices.Reverse(in)
		case "interleaved":
			slices.SortStableFunc(in, func(a, b *Object) int { return strings.Compare(a.Name()[len(a.Name())-1:], b.Name()[len(b.Name())-1:]) })
		}
		c.warmWorker(sc, nil, true)(in)
		if n, total := warmed(t, c, sc); n != total {
			t.Errorf("%s: %d of %d pods have their column values", order, n, total)
		}
	}
}
