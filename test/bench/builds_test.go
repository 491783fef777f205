package bench

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestOrders(t *testing.T) {
	if got := orders(2); !slices.EqualFunc(got, [][]int{{0, 1}, {1, 0}}, slices.Equal) {
		t.Fatalf("orders(2) = %v, want alternation (0 1), (1 0)", got)
	}
	for n := 1; n <= 4; n++ {
		got := orders(n)
		// Over a cycle, each server goes at each place, and right after
		// each other server, equally often.
		at := map[[2]int]int{}
		follows := map[[2]int]int{}
		for _, p := range got {
			if len(p) != n {
				t.Fatalf("orders(%d): %v has %d servers", n, p, len(p))
			}
			for i, s := range p {
				at[[2]int{s, i}]++
				if i > 0 {
					follows[[2]int{p[i-1], s}]++
				}
			}
		}
		for s := range n {
			for i := range n {
				if at[[2]int{s, i}] != len(got)/n {
					t.Errorf("orders(%d): server %d at place %d %d times of %d orders", n, s, i, at[[2]int{s, i}], len(got))
				}
				if s != i && follows[[2]int{s, i}] != follows[[2]int{0, 1}] {
					t.Errorf("orders(%d): %d then %d %d times, 0 then 1 %d times", n, s, i, follows[[2]int{s, i}], follows[[2]int{0, 1}])
				}
			}
		}
	}
}

func TestParseBuilds(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "old", "cmd", "kubeindex"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old")
	got, err := parseBuilds([]string{old, "before=" + old})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].label != "old" || got[1].label != "before" || got[1].dir != old {
		t.Errorf("labels %q, %q, dir %q", got[0].label, got[1].label, got[1].dir)
	}
	for _, bad := range [][]string{{dir}, {"=" + old}, {"x=" + old, "x=" + old}, {"x="}} {
		if _, err := parseBuilds(bad); err == nil {
			t.Errorf("parseBuilds(%q) accepted", bad)
		}
	}
}
