package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// An otherBuild is another kubeindex source tree (Options.Builds) whose binary
// serves the same seeded pods beside the main kubeindex, so that the
// requests/s and latency rounds ask both codes, and echo, side by side in
// one run: the only way two codes' figures compare on a shared machine.
type otherBuild struct {
	label, dir, bin string
	k               *kubeindex
}

// parseBuilds reads Options.Builds: "label=dir" or a bare dir, labelled
// by its last element.
func parseBuilds(specs []string) ([]*otherBuild, error) {
	var out []*otherBuild
	for _, s := range specs {
		label, dir, ok := strings.Cut(s, "=")
		if !ok {
			label, dir = filepath.Base(filepath.Clean(s)), s
		}
		if label == "" || dir == "" {
			return nil, fmt.Errorf("build %q: want label=dir or dir", s)
		}
		if _, err := os.Stat(filepath.Join(dir, "cmd", "kubeindex")); err != nil {
			return nil, fmt.Errorf("build %q: %s holds no cmd/kubeindex: %w", label, dir, err)
		}
		if slices.ContainsFunc(out, func(b *otherBuild) bool { return b.label == label }) {
			return nil, fmt.Errorf("build %q named twice", label)
		}
		out = append(out, &otherBuild{label: label, dir: dir})
	}
	return out, nil
}

// buildOthers compiles each build's kubeindex into the run's directory.
func (r *runner) buildOthers(ctx context.Context) error {
	for i, b := range r.builds {
		b.bin = filepath.Join(r.dir, fmt.Sprintf("kubeindex-build-%d", i))
		r.logf("building kubeindex of %s (%s)", b.label, b.dir)
		if err := build(ctx, b.dir, "./cmd/kubeindex", b.bin); err != nil {
			return err
		}
	}
	return nil
}

// startOthers starts each build's kubeindex (five indexes, as the main
// one) on the seeded pods, once, and waits for it to sync.
func (r *runner) startOthers(ctx context.Context) error {
	for i, b := range r.builds {
		if b.k != nil {
			continue
		}
		k, err := startKubeindex(b.bin, r.dir, r.c.Kubeconfig, fmt.Sprintf("kubeindex-build-%d", i), podSelector, "", fiveIndexes)
		if err != nil {
			return err
		}
		r.track(k.proc)
		if _, err := k.waitReady(ctx, 10*time.Minute); err != nil {
			return err
		}
		st, err := k.status(ctx)
		if err != nil {
			return err
		}
		if st.Count != r.p.n {
			return fmt.Errorf("build %s synced %d pods, want %d", b.label, st.Count, r.p.n)
		}
		b.k = k
	}
	return nil
}

// servers are the kubeindex processes the request figures ask: the main
// one (label "") and each build's.
func (r *runner) servers() []*otherBuild {
	out := []*otherBuild{{k: r.main}}
	return append(out, r.builds...)
}

// figureName is name for the main kubeindex, and name with the build's
// label for another build's.
func (b *otherBuild) figureName(name string) string {
	if b.label == "" {
		return name
	}
	return name + " [" + b.label + "]"
}

// settle waits until each server has spent less than a tenth of a core
// over half a second (the column warmer and standing indexes done after a
// sync), at most limit: a server still busy with its own work would pass
// for a slower one.
func settle(ctx context.Context, servers []*otherBuild, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for _, s := range servers {
		for time.Now().Before(deadline) && ctx.Err() == nil {
			before, err := s.k.cpu()
			if err != nil {
				break
			}
			time.Sleep(500 * time.Millisecond)
			after, err := s.k.cpu()
			if err != nil || after-before < 50*time.Millisecond {
				break
			}
		}
	}
}

// orders are the orders of asking n servers: every permutation of 0..n-1
// in turn, so that each server follows each other equally often over a
// cycle (a fixed cyclic order would have one always follow another). For
// two, the orders are (0, 1), (1, 0): alternation.
func orders(n int) [][]int {
	if n <= 1 {
		return [][]int{make([]int, n)}
	}
	var out [][]int
	for _, rest := range orders(n - 1) {
		for at := range n {
			// Insert n-1 at each place of an order of the others; for n
			// = 2 this gives (1, 0) before (0, 1): reversed below.
			p := make([]int, 0, n)
			p = append(p, rest[:at]...)
			p = append(p, n-1)
			p = append(p, rest[at:]...)
			out = append(out, p)
		}
	}
	slices.Reverse(out)
	return out
}

// interleavedLatencies times count GETs of each of urls[s](i), one of each
// server in turn per request i in the order orders gives for i, and
// returns each server's durations, sorted. Any answer but 200 is an error.
func interleavedLatencies(ctx context.Context, client *http.Client, count int, urls []func(i int) string, buf []byte) ([][]time.Duration, error) {
	out := make([][]time.Duration, len(urls))
	for s := range out {
		out[s] = make([]time.Duration, 0, count)
	}
	perms := orders(len(urls))
	for i := range count {
		for _, s := range perms[i%len(perms)] {
			u := urls[s](i)
			t := time.Now()
			if err := get(ctx, client, u, buf); err != nil {
				return nil, err
			}
			out[s] = append(out[s], time.Since(t))
		}
	}
	for _, d := range out {
		slices.Sort(d)
	}
	return out, nil
}
