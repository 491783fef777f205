package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// churnWorkers send the churn's updates concurrently.
const churnWorkers = 16

// churnResult is what a churn sent.
type churnResult struct {
	Sent     int
	Duration time.Duration
	// LastRV is the highest resourceVersion the API server returned: a
	// cache at or past it has seen every update.
	LastRV uint64
	// Acked is when the API server answered each update (Unix
	// nanoseconds), by the update's send stamp.
	Acked map[int64]int64
}

// churn updates pods through the API server: each update is a merge patch
// of the stampKey annotation to the send time, so each is one MODIFIED
// event carrying when it was sent. It sends `count` updates, paced at
// `rate` per second when rate > 0, or as fast as the workers go.
func churn(ctx context.Context, cs kubernetes.Interface, p plan, start, count, rate int) (churnResult, error) {
	var next, lastRV atomic.Uint64
	var ackMu sync.Mutex
	acked := make(map[int64]int64, count)
	var firstErr error
	var once sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	begin := time.Now()
	var interval time.Duration
	if rate > 0 {
		interval = time.Second / time.Duration(rate)
	}
	var wg sync.WaitGroup
	for range churnWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= count {
					return
				}
				if interval > 0 {
					if d := time.Until(begin.Add(time.Duration(k) * interval)); d > 0 {
						time.Sleep(d)
					}
				}
				r := p.ref((start + k) % p.n)
				sent := time.Now().UnixNano()
				patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, stampKey, sent)
				pod, err := cs.CoreV1().Pods(r.Namespace).Patch(ctx, r.Name, types.MergePatchType, patch,
					metav1.PatchOptions{FieldManager: "bench-churn"})
				ackMu.Lock()
				acked[sent] = time.Now().UnixNano()
				ackMu.Unlock()
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("churn %s/%s: %w", r.Namespace, r.Name, err); cancel() })
					return
				}
				rv, _ := strconv.ParseUint(pod.ResourceVersion, 10, 64)
				for {
					old := lastRV.Load()
					if rv <= old || lastRV.CompareAndSwap(old, rv) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return churnResult{Sent: min(count, int(next.Load())), Duration: time.Since(begin), LastRV: lastRV.Load(), Acked: acked}, firstErr
}
