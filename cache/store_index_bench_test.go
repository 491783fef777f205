package cache

import (
	"fmt"
	"testing"
)

// BenchmarkPostingsReplace is the cost of an update in one index value
// of n objects (an object replaced by its next version), held in the
// ordered slice (up to maxSorted) or in a set (maxSorted lowered).
//
//	go test -run XXX -bench PostingsReplace ./cache
func BenchmarkPostingsReplace(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, form := range []string{"ordered", "set"} {
			b.Run(fmt.Sprintf("%d/%s", n, form), func(b *testing.B) {
				defer func(was int) { maxSorted = was }(maxSorted)
				if form == "set" {
					maxSorted = maxFew
				}
				var versions [2][]*Object // each object's two versions, in turn
				p := &postings{}
				for i := range n {
					name := fmt.Sprintf("pod-%05d", i)
					for v := range versions {
						versions[v] = append(versions[v], &Object{namespace: "bench", name: name})
					}
					p.add(versions[0][i])
				}
				for i := 0; b.Loop(); i++ {
					k, v := i%n, i/n%2
					p.replace(versions[v][k], versions[1-v][k])
				}
			})
		}
	}
}
