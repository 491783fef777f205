package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The question figures' heaps are each read in a settled state, in one
// run, side by side: a kubeindex that keeps no column value and no
// ordered index (--lazy-columns: no column warmer, no standing index),
// what a kubeindex without question indexes costs, once synced; the
// default kubeindex once its column warmer has kept every pod's column
// values and built the standing indexes; the same with an ordered index
// per pod column; and after the questions.

// questionHeaps are those heaps, in MB (an empty kubeindex's included).
type questionHeaps struct {
	base, lazy, settled, columns, after float64
	// asked is how many indexes the sorts by each pod column added
	// beside the standing ones (kubeindex_ordered_indexes).
	asked, standing int
}

// lazyHeap is the live heap (MB) of a kubeindex with --lazy-columns once
// it has synced the want pods of kubeconfig matching selector.
func (r *runner) lazyHeap(ctx context.Context, kubeconfig, selector string, want int) (float64, error) {
	k, err := startKubeindex(r.kubeindex, r.dir, kubeconfig, "kubeindex-lazy", selector, "", fiveIndexes, "--lazy-columns")
	if err != nil {
		return 0, err
	}
	r.track(k.proc)
	defer k.stop()
	if _, err := k.waitReady(ctx, 15*time.Minute); err != nil {
		return 0, err
	}
	st, err := k.status(ctx)
	if err != nil {
		return 0, err
	}
	if st.Count != want {
		return 0, fmt.Errorf("kubeindex-lazy synced %d pods, want %d", st.Count, want)
	}
	if _, err := waitSettled(ctx, k, time.Minute); err != nil { // nothing to wait for: says the flag held
		return 0, err
	}
	return currentHeap(ctx, k)
}

// orderedIndexes reads k's ordered index and standing-pending gauges,
// summed over its resources; found is false when its /metrics has none
// (a build that cannot say when it has settled).
func orderedIndexes(ctx context.Context, k *kubeindex) (asked, standing, pending int, found bool, err error) {
	err = k.scrapeMetrics(ctx, func(line string) error {
		var to *int
		switch {
		case strings.HasPrefix(line, `kubeindex_ordered_indexes{kind="asked",`):
			to = &asked
		case strings.HasPrefix(line, `kubeindex_ordered_indexes{kind="standing",`):
			to = &standing
		case strings.HasPrefix(line, "kubeindex_standing_indexes_pending{"):
			to, found = &pending, true
		default:
			return nil
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return fmt.Errorf("/metrics: %q: %w", line, err)
		}
		*to += int(v)
		return nil
	})
	return asked, standing, pending, found, err
}

// waitSettled waits until k's column warmer has built every standing
// index, which it does right after its first pass keeping every pod's
// column values (kubeindex_standing_indexes_pending 0), and returns how
// long that took: a heap read before then counts a pass under way.
func waitSettled(ctx context.Context, k *kubeindex, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		_, _, pending, found, err := orderedIndexes(ctx, k)
		switch {
		case err != nil:
			return 0, err
		case !found:
			return 0, fmt.Errorf("%s's /metrics has no kubeindex_standing_indexes_pending: it cannot say when it has settled", k.name)
		case pending == 0:
			return time.Since(start), nil
		case time.Since(start) > timeout:
			return 0, fmt.Errorf("%s: %d standing indexes still pending after %v", k.name, pending, timeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// columnIndexHeap asks k (settled) for a page sorted by each pod column,
// which builds an ordered index for each column that has no standing one,
// and reads the heap then, with how many indexes are asked and standing.
func (r *runner) columnIndexHeap(ctx context.Context, client *http.Client, k *kubeindex, h *questionHeaps) error {
	for _, col := range podColumns {
		if _, err := getBody(ctx, client, questionURL(k.base, "sort="+col, 0)); err != nil {
			return err
		}
	}
	var err error
	if h.asked, h.standing, _, _, err = orderedIndexes(ctx, k); err != nil {
		return err
	}
	h.columns, err = currentHeap(ctx, k)
	return err
}

// addHeapFigures reports the heaps per pod of n pods.
func (r *runner) addHeapFigures(h questionHeaps, n int) {
	perPod := func(mb float64) float64 { return (mb - h.base) * (1 << 20) / float64(n) }
	lazy, settled, columns, after := perPod(h.lazy), perPod(h.settled), perPod(h.columns), perPod(h.after)
	heaps := fmt.Sprintf("live heap (GODEBUG=gctrace=1, median of three GCs, 1 MB resolution) %.0f MB with --lazy-columns, %.0f MB settled, %.0f MB with the columns indexed, %.0f MB after the questions; an empty kubeindex %.0f MB",
		h.lazy, h.settled, h.columns, h.after, h.base)
	r.add(&Figure{Name: "live heap per pod with the pod columns indexed", Unit: "B", Kubeindex: columns, Comparison: lazy,
		Against: "a kubeindex without column values or ordered indexes (--lazy-columns)", Ratio: safeDiv(columns, lazy), Target: "ratio <= 1.2", Met: columns <= 1.2*lazy,
		Note: fmt.Sprintf("%d pods; the default kubeindex settled, then a page sorted by each of the %d pod columns (%v): %d standing and %d asked ordered indexes; %.3f × the default settled; %s",
			n, len(podColumns), podColumns, h.standing, h.asked, safeDiv(columns, settled), heaps)})
	r.add(&Figure{Name: "live heap per pod settled", Unit: "B", Kubeindex: settled, Comparison: lazy,
		Against: "a kubeindex without column values or ordered indexes (--lazy-columns)", Ratio: safeDiv(settled, lazy), Target: information, Met: true,
		Note: fmt.Sprintf("%d pods; the default kubeindex once its column warmer kept every pod's column values and built the standing indexes (kubeindex_standing_indexes_pending 0); %s", n, heaps)})
	if h.asked > 0 {
		r.add(&Figure{Name: "ordered index memory per pod", Unit: "B", Kubeindex: (columns - settled) / float64(h.asked), Target: information, Met: true,
			Note: fmt.Sprintf("%d pods; the live heap's growth (%.0f → %.0f MB) over the %d indexes the column sorts added to the settled kubeindex (over the column values it kept already), per index", n, h.settled, h.columns, h.asked)})
	}
	r.add(&Figure{Name: "live heap per pod after the questions", Unit: "B", Kubeindex: after, Comparison: columns,
		Against: "the same kubeindex before them (the columns indexed)", Ratio: safeDiv(after, columns), Target: information, Met: true,
		Note: fmt.Sprintf("%d pods; what the questions keep (the answers kept for their walks, at most 256 for 5 minutes; their ordered indexes); %s", n, heaps)})
}
