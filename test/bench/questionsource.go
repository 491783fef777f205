package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// questionSource is the kubeindex the questions are asked of, the base
// URL of its fake API server ("" for none) and how many pods it holds:
// with QuestionPods >= 0, one syncing a fake API server of its own
// (benchfeed) that holds the demo's crowd of that many pods, none
// changing unless told (SQLite loads a snapshot); otherwise the seeded
// cluster's main kubeindex.
func (r *runner) questionSource(ctx context.Context) (_ *kubeindex, feed string, _ int, _ error) {
	if r.o.QuestionPods < 0 {
		return r.main, "", r.p.n, nil
	}
	// Generating 100,000 pods takes about a minute on a quiet machine.
	_, src, err := r.startReadyWithin(ctx, 15*time.Minute, "benchfeed-questions", r.feedBin, "-pods", fmt.Sprint(r.o.QuestionPods))
	if err != nil {
		return nil, "", 0, err
	}
	kubeconfig := filepath.Join(r.dir, "questions.kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, feedKubeconfig, src), 0o600); err != nil {
		return nil, "", 0, err
	}
	k, err := startKubeindex(r.kubeindex, r.dir, kubeconfig, "kubeindex-questions", "", "", fiveIndexes)
	if err != nil {
		return nil, "", 0, err
	}
	r.track(k.proc)
	wall, err := k.waitReady(ctx, 15*time.Minute)
	if err != nil {
		return nil, "", 0, err
	}
	k.syncedGCs = len(k.gcs())
	st, err := k.status(ctx)
	if err != nil {
		return nil, "", 0, err
	}
	if st.Count != r.o.QuestionPods {
		return nil, "", 0, fmt.Errorf("kubeindex-questions synced %d pods, want %d", st.Count, r.o.QuestionPods)
	}
	r.logf("questions: kubeindex synced the fake API server's %d pods in %v", st.Count, wall.Round(time.Millisecond))
	return k, src, st.Count, nil
}

// changeAPod has the fake API server at feed change one pod (an
// annotation, which no question reads) and waits until k has the event.
func changeAPod(ctx context.Context, client *http.Client, feed string, k *kubeindex) error {
	before, err := k.status(ctx)
	if err != nil {
		return err
	}
	if _, err := getBody(ctx, client, feed+"/bench/publish?rate=1000&count=1"); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := k.status(ctx)
		if err != nil {
			return err
		}
		if st.ResourceVersion != before.ResourceVersion {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not see a pod change in a minute (resourceVersion %s)", k.name, st.ResourceVersion)
		}
		time.Sleep(time.Millisecond)
	}
}

// podColumns are the pod Table's columns as questions name them.
var podColumns = []string{"name", "ready", "status", "restarts", "age", "ip", "node", "nominated-node", "readiness-gates"}

// columnIndexMemory reports what ordered indexes cost in k's heap (MB
// figures from currentHeap; base is an empty kubeindex's): one more index
// over a column whose values the questions kept already (afterQ: the heap
// after them), per pod; then the whole heap per pod once every pod column
// has an index of its own, against the heap before any question (before).
func (r *runner) columnIndexMemory(ctx context.Context, client *http.Client, k *kubeindex, n int, base, before, afterQ float64) error {
	// sort=restarts, unfiltered: an index of its own beside the
	// questions' (theirs hold their filter's keys).
	if _, err := getBody(ctx, client, questionURL(k.base, "sort=restarts", 0)); err != nil {
		return err
	}
	one, err := currentHeap(ctx, k)
	if err != nil {
		return err
	}
	nf := float64(n)
	r.add(&Figure{Name: "ordered index memory per pod", Unit: "B", Kubeindex: (one - afterQ) * (1 << 20) / nf, Target: information, Met: true,
		Note: fmt.Sprintf("%d pods; the live heap's growth (%.0f → %.0f MB, 1 MB resolution) when one more ordered index is built, sort=restarts, over column values the questions kept already", n, afterQ, one)})
	for _, col := range podColumns {
		if _, err := getBody(ctx, client, questionURL(k.base, "sort="+col, 0)); err != nil {
			return err
		}
	}
	all, err := currentHeap(ctx, k)
	if err != nil {
		return err
	}
	with, without := (all-base)*(1<<20)/nf, (before-base)*(1<<20)/nf
	r.add(&Figure{Name: "live heap per pod with the pod columns indexed", Unit: "B", Kubeindex: with, Comparison: without,
		Against: "the same kubeindex before any question", Ratio: safeDiv(with, without), Target: "ratio <= 1.2", Met: with <= 1.2*without,
		Note: fmt.Sprintf("%d pods; an ordered index sorted by each of the %d pod columns (%v), beside the questions' indexes and kept walks (at most 12 indexes: the least used go); live heap %.0f MB, %.0f MB before, an empty kubeindex %.0f MB",
			n, len(podColumns), podColumns, all, before, base)})
	return nil
}
