package bench

import (
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

// The scale figure's second kubeindex caches exactly the plan's first N/3
// pods, selected by the API server: the selector must match those and no
// other, wherever N/3 falls in a namespace.
func TestFirstSelector(t *testing.T) {
	for _, tt := range []struct{ n, m int }{
		{200, 66}, {4500, 1500}, {5000, 1666}, {3000, 1000}, {150000, 50000}, {200, 0}, {200, 200},
	} {
		p := plan{n: tt.n}
		text := p.firstSelector(tt.m)
		sel, err := fields.ParseSelector(text)
		if err != nil {
			t.Fatalf("n %d, m %d: %q: %v", tt.n, tt.m, text, err)
		}
		for i := range tt.n {
			ref := p.ref(i)
			got := sel.Matches(fields.Set{"metadata.name": ref.Name, "metadata.namespace": ref.Namespace})
			if want := i < tt.m; got != want {
				t.Fatalf("n %d, m %d: pod %d (%s/%s) selected %v, want %v (selector %.200q)", tt.n, tt.m, i, ref.Namespace, ref.Name, got, want, text)
			}
		}
	}
	// At 150,000 the first 50,000 are whole namespaces: 100 terms.
	if got := len(fields.ParseSelectorOrDie(plan{n: 150000}.firstSelector(50000)).Requirements()); got != 100 {
		t.Errorf("150,000 against 50,000: %d terms, want 100 (one per namespace)", got)
	}
}
