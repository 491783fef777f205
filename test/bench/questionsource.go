package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// questionSource is the kubeindex the questions are asked of, settled
// (waitSettled), the base URL of its fake API server ("" for none), how
// many pods it holds and the live heap (MB) of a kubeindex with
// --lazy-columns over the same pods, synced and stopped before it
// started: with QuestionPods >= 0, one syncing a fake API server of its
// own (benchfeed) that holds the demo's crowd of that many pods, none
// changing unless told (SQLite loads a snapshot); otherwise the seeded
// cluster's main kubeindex.
func (r *runner) questionSource(ctx context.Context) (_ *kubeindex, feed string, _ int, lazy float64, _ error) {
	if r.o.QuestionPods < 0 {
		lazy, err := r.lazyHeap(ctx, r.c.Kubeconfig, podSelector, r.p.n)
		if err != nil {
			return nil, "", 0, 0, err
		}
		if _, err := waitSettled(ctx, r.main, 15*time.Minute); err != nil {
			return nil, "", 0, 0, err
		}
		return r.main, "", r.p.n, lazy, nil
	}
	// Generating 100,000 pods takes about a minute on a quiet machine.
	_, src, err := r.startReadyWithin(ctx, 15*time.Minute, "benchfeed-questions", r.feedBin, "-pods", fmt.Sprint(r.o.QuestionPods))
	if err != nil {
		return nil, "", 0, 0, err
	}
	kubeconfig := filepath.Join(r.dir, "questions.kubeconfig")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, feedKubeconfig, src), 0o600); err != nil {
		return nil, "", 0, 0, err
	}
	if lazy, err = r.lazyHeap(ctx, kubeconfig, "", r.o.QuestionPods); err != nil {
		return nil, "", 0, 0, err
	}
	k, err := startKubeindex(r.kubeindex, r.dir, kubeconfig, "kubeindex-questions", "", "", fiveIndexes)
	if err != nil {
		return nil, "", 0, 0, err
	}
	r.track(k.proc)
	wall, err := k.waitReady(ctx, 15*time.Minute)
	if err != nil {
		return nil, "", 0, 0, err
	}
	k.syncedGCs = len(k.gcs())
	st, err := k.status(ctx)
	if err != nil {
		return nil, "", 0, 0, err
	}
	if st.Count != r.o.QuestionPods {
		return nil, "", 0, 0, fmt.Errorf("kubeindex-questions synced %d pods, want %d", st.Count, r.o.QuestionPods)
	}
	settle, err := waitSettled(ctx, k, 15*time.Minute)
	if err != nil {
		return nil, "", 0, 0, err
	}
	r.logf("questions: kubeindex synced the fake API server's %d pods in %v, settled %v later", st.Count, wall.Round(time.Millisecond), settle.Round(time.Millisecond))
	return k, src, st.Count, lazy, nil
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
