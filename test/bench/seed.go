package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// seedWorkers create pods in parallel: one API server takes many
// concurrent writes, and a single client would wait on each round trip.
const seedWorkers = 32

// markerName is a ConfigMap recording that a seed of N pods completed, so a
// reused cluster directory (-dir) is not seeded twice.
const markerName = "kubeindex-bench-seeded"

// writeClient is a typed client for seeding and churn: protobuf (cheaper for
// the API server to decode) and no client-side rate limit worth the name.
func writeClient(cfg *rest.Config) (*kubernetes.Clientset, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20000, 40000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(cfg)
}

// seed creates the plan's namespaces (with the default ServiceAccount the
// admission plugin wants) and pods, each with one create by a controller's
// field manager and one status update by the kubelet's, as a real cluster
// would write them; managedFields come out as in a real cluster.
func seed(ctx context.Context, cs kubernetes.Interface, p plan, logf func(string, ...any)) error {
	// A marker of fewer pods (a 50,000-pod directory copied to seed
	// 150,000) says its first pods are complete: the plan's pod i does not
	// depend on N, so only the rest are created.
	from := 0
	if cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, markerName, metav1.GetOptions{}); err == nil {
		m, _ := strconv.Atoi(cm.Data["pods"])
		if m == p.n {
			logf("seed: %d pods already there (marker %s)", p.n, markerName)
			return nil
		}
		if m > 0 && m < p.n {
			from = m
			logf("seed: the first %d pods already there (marker %s), creating the other %d", m, markerName, p.n-m)
		}
	}
	for _, ns := range p.namespaces() {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
		_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("serviceaccount %s/default: %w", ns, err)
		}
	}
	begin := time.Now()
	var next, done atomic.Int64
	next.Store(int64(from))
	var firstErr error
	var errOnce sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range seedWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= p.n || ctx.Err() != nil {
					return
				}
				if err := seedPodRetrying(ctx, cs, p, i); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				if d := done.Add(1); d%5000 == 0 {
					logf("seed: %d/%d pods (%.0f/s)", from+int(d), p.n, float64(d)/time.Since(begin).Seconds())
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	logf("seed: %d pods in %v", p.n-from, time.Since(begin).Round(time.Millisecond))
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: markerName}, Data: map[string]string{"pods": strconv.Itoa(p.n)}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, marker, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = cs.CoreV1().ConfigMaps("default").Update(ctx, marker, metav1.UpdateOptions{})
		return err
	} else {
		return err
	}
}

// seedAttempts bounds the tries of one pod: an API server on a loaded
// machine answers some writes with a timeout from etcd or a 429, which a
// later try gets through; a seed of 100,000 pods meets several.
const seedAttempts = 8

// seedPodRetrying seeds pod i, trying again after a transient refusal
// (timeouts, throttling, an internal error such as etcd's "request timed
// out"), with a doubling pause; any other error, or the last attempt's,
// stops the seed.
func seedPodRetrying(ctx context.Context, cs kubernetes.Interface, p plan, i int) error {
	pause := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := seedPod(ctx, cs, p, i)
		if err == nil || attempt == seedAttempts || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause *= 2
	}
}

// transient says whether a write's error may pass on a later try.
func transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err) || strings.Contains(err.Error(), "request timed out")
}

// seedPod creates pod i and writes its status. A pod left by an interrupted
// seed is completed rather than failed on.
func seedPod(ctx context.Context, cs kubernetes.Interface, p plan, i int) error {
	pods := cs.CoreV1().Pods(p.ref(i).Namespace)
	pod, err := pods.Create(ctx, p.newPod(i), metav1.CreateOptions{FieldManager: "kube-controller-manager"})
	if apierrors.IsAlreadyExists(err) {
		pod, err = pods.Get(ctx, p.ref(i).Name, metav1.GetOptions{})
		if err == nil && pod.Status.PodIP != "" {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("pod %d: %w", i, err)
	}
	p.setStatus(pod, i)
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
		return fmt.Errorf("pod %d status: %w", i, err)
	}
	return nil
}
