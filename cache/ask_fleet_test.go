package cache_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// TestContinueAfterStaysInTheWalk: a token made by ContinueAfter inside
// the last page of a kept walk (a page that carries no continue token of
// its own: nothing follows it) resumes in that walk, as one inside an
// earlier page does: an object deleted meanwhile is still shown and the
// total stays the first page's. Both kinds of walk: of an ordered index
// (the whole resource) and of a sorted selection (a namespace holding
// fewer than a fifth of the pods, answered from its objects).
func TestContinueAfterStaysInTheWalk(t *testing.T) {
	const sort = "-status.phase,spec.nodeName"
	f, sc, keys, narrow, _ := sortedPodsFixture(t, sort)
	for _, ns := range []string{"", narrow} {
		q := cache.ListQuery{Namespace: ns, Ask: &cache.Ask{Schema: sc, Sort: keys, SortText: sort, Now: time.Now()}}
		whole, err := f.Cache.List("pods", q)
		if err != nil {
			t.Fatal(err)
		}
		// a first page of all but three, then the walk's last page
		q.Limit = whole.Total - 3
		first, err := f.Cache.List("pods", q)
		if err != nil || first.Continue == "" {
			t.Fatalf("namespace %q: a first page of %d: continue %q, %v", ns, q.Limit, first.Continue, err)
		}
		q.Continue = first.Continue
		last, err := f.Cache.List("pods", q)
		if err != nil || len(last.Items) != 3 || last.Continue != "" {
			t.Fatalf("namespace %q: the walk's last page: %d items, continue %q, %v", ns, len(last.Items), last.Continue, err)
		}
		gone := last.Items[2]
		if err := f.Sim.Delete("pods", gone.Namespace(), gone.Name()); err != nil {
			t.Fatal(err)
		}
		cachetest.Eventually(t, "the delete is cached", func() bool {
			_, _, err := f.Cache.Get("pods", gone.Namespace(), gone.Name())
			return err != nil
		})
		q.Continue = last.ContinueAfter(q, 1, last.Values[0])
		rest, err := f.Cache.List("pods", q)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := keysOf(rest.Items), keysOf(last.Items[1:]); !slices.Equal(got, want) || rest.Total != whole.Total {
			t.Errorf("namespace %q: after the walk's last page's first item: %v, total %d; expect %v, total %d (the first page's moment)",
				ns, got, rest.Total, want, whole.Total)
		}
	}
}

// sortedPodsFixture starts a cache of the standard pods and parses sort
// under the pods' columns; narrow is a namespace holding from 6 pods to
// a fifth of them (a sorted selection answered from its objects, not a
// walk of an ordered index); pods is how many there are.
func sortedPodsFixture(t *testing.T, sort string) (f *cachetest.Fixture, sc *query.Schema, keys []query.SortKey, narrow string, pods int) {
	t.Helper()
	f = cachetest.Start(t, cachetest.PodSpec())
	sc = query.NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))
	keys, err := sc.ParseSort(sort)
	if err != nil {
		t.Fatal(err)
	}
	all, err := f.Cache.List("pods", cache.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	perNS := map[string]int{}
	for _, o := range all.Items {
		perNS[o.Namespace()]++
	}
	for _, ns := range slices.Sorted(maps.Keys(perNS)) {
		if n := perNS[ns]; n >= 6 && n*5 < len(all.Items) {
			return f, sc, keys, ns, len(all.Items)
		}
	}
	t.Fatalf("no namespace holds from 6 pods to a fifth of %d: %v", len(all.Items), perNS)
	return
}

// TestContinueAfterKeepsTheFirstPagesMoment: the places ContinueAfter
// makes in a first page of a question are of that page's moment, also
// when the page holds every match (no walk kept of its own): the place
// before its first item (n = 0) and one after its k-th both page through
// the matches as they were, though an object among them is deleted, one
// changed and one created meanwhile; the total stays the page's. Both
// kinds of walk: of an ordered index (the whole resource) and of a sorted
// selection (one namespace). The place before the first item is no
// token of a plain list, is refused under another sort, and, with a
// position or values added, is malformed.
func TestContinueAfterKeepsTheFirstPagesMoment(t *testing.T) {
	const sort = "spec.nodeName"
	f, sc, keys, narrow, pods := sortedPodsFixture(t, sort)
	for i, ns := range []string{"", narrow} {
		q := cache.ListQuery{Namespace: ns, Ask: &cache.Ask{Schema: sc, Sort: keys, SortText: sort, Now: time.Now()}}
		q.Limit = pods // every match on the first page
		first, err := f.Cache.List("pods", q)
		if err != nil || first.Continue != "" || len(first.Items) < 6 {
			t.Fatalf("namespace %q: a first page of every match: %d items, continue %q, %v", ns, len(first.Items), first.Continue, err)
		}
		start := first.ContinueAfter(q, 0, nil)
		after2 := first.ContinueAfter(q, 2, first.Values[1])
		if start == "" || start == after2 {
			t.Fatalf("namespace %q: places %q and %q", ns, start, after2)
		}
		// Meanwhile: the last match deleted, the fourth changed to sort
		// first, a pod created.
		gone, moved := first.Items[len(first.Items)-1], first.Items[3]
		if err := f.Sim.Delete("pods", gone.Namespace(), gone.Name()); err != nil {
			t.Fatal(err)
		}
		changed := strings.Replace(string(moved.Raw()), `"nodeName":"`, `"nodeName":"a-first-`, 1)
		if changed == string(moved.Raw()) {
			t.Fatalf("%s has no nodeName", moved.Key())
		}
		if err := f.Sim.Apply("pods", []byte(changed)); err != nil {
			t.Fatal(err)
		}
		created := strings.Replace(string(moved.Raw()), `"name":"`+moved.Name()+`"`, `"name":"late-`+fmt.Sprint(i)+`"`, 1)
		created = strings.Replace(created, `"uid":"`, `"uid":"late-`, 1)
		if err := f.Sim.Apply("pods", []byte(created)); err != nil {
			t.Fatal(err)
		}
		cachetest.Eventually(t, "the changes are cached", func() bool {
			_, _, err := f.Cache.Get("pods", gone.Namespace(), gone.Name())
			o, _, err2 := f.Cache.Get("pods", moved.Namespace(), moved.Name())
			return err != nil && err2 == nil && strings.Contains(string(o.Raw()), "a-first-")
		})
		for _, tc := range []struct {
			token string
			want  []*cache.Object
		}{{start, first.Items}, {after2, first.Items[2:]}} {
			var got []*cache.Object
			pq := q
			pq.Limit, pq.Continue = 2, tc.token
			for {
				page, err := f.Cache.List("pods", pq)
				if err != nil {
					t.Fatal(err)
				}
				if page.Total != first.Total {
					t.Errorf("namespace %q: a page's total %d; expect the first page's %d", ns, page.Total, first.Total)
				}
				got = append(got, page.Items...)
				if page.Continue == "" {
					break
				}
				pq.Continue = page.Continue
			}
			if !slices.Equal(got, tc.want) { // the same objects: as they were
				t.Errorf("namespace %q: %v; expect the first page's moment's %v", ns, keysOf(got), keysOf(tc.want))
			}
		}
		other := q
		other.Ask = &cache.Ask{Schema: sc, Sort: nil, SortText: "", Now: q.Ask.Now}
		other.Continue = start
		if _, err := f.Cache.List("pods", other); !errors.Is(err, cache.ErrInvalid) {
			t.Errorf("namespace %q: the place before the first item under another sort: %v; expect ErrInvalid", ns, err)
		}
		if plain := first.ContinueAfter(cache.ListQuery{Namespace: ns}, 0, nil); plain != "" {
			t.Errorf("a plain list's place before its first item: %q; expect none", plain)
		}
	}
	for _, forged := range []string{
		`{"r":"pods","a":"","q":true,"s":"spec.nodeName","w":"x-1","p":3}`,
		`{"r":"pods","a":"","q":true,"s":"spec.nodeName","w":"x-1","v":[]}`,
		`{"r":"pods","a":"","s":"spec.nodeName","w":"x-1"}`,
		`{"r":"pods","a":"","q":true,"s":"spec.nodeName"}`,
	} {
		q := cache.ListQuery{Ask: &cache.Ask{Schema: sc, Sort: keys, SortText: sort, Now: time.Now()},
			Continue: base64.RawURLEncoding.EncodeToString([]byte(forged))}
		if _, err := f.Cache.List("pods", q); !errors.Is(err, cache.ErrInvalid) || !strings.Contains(err.Error(), "continue") {
			t.Errorf("forged %s: %v; expect ErrInvalid naming continue", forged, err)
		}
	}
}
