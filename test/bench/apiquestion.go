package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServerQuestion is the question apiServerPage computes.
const apiServerQuestion = "running by restarts"

// questionThroughAPIServer answers page 1 of apiServerQuestion (query:
// kubeindex's parameters for it) over the seeded cluster as a dashboard
// without kubeindex does: a client-go list of every pod from the API
// server (JSON, resourceVersion=0: its watch cache), then the filter and
// the sort in the client. The page must be the main kubeindex's (an
// independent check of kubeindex's answer); its time and bytes are
// information beside the main kubeindex's p50 of the same page, timed in
// the same rounds.
func (r *runner) questionThroughAPIServer(ctx context.Context, query string) error {
	label := "page 1 (" + apiServerQuestion + ")"
	var wire atomic.Int64
	cfg := rest.CopyConfig(r.c.RESTConfig())
	cfg.DisableCompression = true // bytes on the wire are the body's
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &wire} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	client := loopbackClient(1)
	defer client.CloseIdleConnections()
	u := questionURL(r.main.base, query, 0)
	kb, err := getBody(ctx, client, u)
	if err != nil {
		return err
	}
	var want pageAnswer
	if err := json.Unmarshal(kb, &want); err != nil {
		return err
	}
	var pairs [][2]float64
	var bytes int64
	for round := range r.o.slowRounds() {
		k, err := timedGets(ctx, client, r.o.LatencyRequests/10, r.o.RoundTime, u)
		if err != nil {
			return err
		}
		wire.Store(0)
		t := time.Now()
		keys, total, err := apiServerPage(ctx, cs)
		if err != nil {
			return err
		}
		d := time.Since(t)
		bytes = wire.Load()
		if want.Metadata.Total == nil || total != *want.Metadata.Total || !slices.Equal(keys, want.keys()) {
			return fmt.Errorf("%s: kubeindex and the API server's list disagree: totals %v and %d, pages\nkubeindex  %v\nAPI server %v",
				label, want.Metadata.Total, total, want.keys(), keys)
		}
		r.logf("questions: %s through the API server, round %d: %v, %d MB; kubeindex p50 %v", label, round, d.Round(time.Millisecond), bytes>>20, percentile(k, .5))
		pairs = append(pairs, [2]float64{ms(percentile(k, .5)), ms(d)})
	}
	f := pairFigure("question "+label+" vs API server list", "ms", "API server: list every pod (client-go, JSON, rv=0), filter and sort in the client",
		information, pairs, cOverK, func(float64) bool { return true })
	f.Note = fmt.Sprintf("%d seeded pods; speed-up (API server / kubeindex's p50 of the same round); the API server's page agreed with kubeindex's", r.p.n)
	r.add(f)
	g := &Figure{Name: "question " + label + " bytes vs API server list", Unit: "B", Kubeindex: float64(len(kb)), Comparison: float64(bytes),
		Against: "API server list of every pod, JSON", Ratio: safeDiv(float64(bytes), float64(len(kb))), Target: information, Met: true,
		Note: "bytes over the wire per answer; ratio: how many times fewer kubeindex sends"}
	r.add(g)
	return nil
}

// apiServerPage is page 1 of "running by restarts" from a list of every
// seeded pod: the running pods by restarts (the sum over containers, as
// the Table column counts them for pods without init containers, as the
// plan's are), most first, ties by namespace and name.
func apiServerPage(ctx context.Context, cs kubernetes.Interface) (keys []string, total int, err error) {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: podSelector, ResourceVersion: "0"})
	if err != nil {
		return nil, 0, err
	}
	restarts := func(p *corev1.Pod) int32 {
		var n int32
		for _, c := range p.Status.ContainerStatuses {
			n += c.RestartCount
		}
		return n
	}
	var running []*corev1.Pod
	for i := range list.Items {
		if p := &list.Items[i]; p.Status.Phase == corev1.PodRunning {
			running = append(running, p)
		}
	}
	slices.SortFunc(running, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(restarts(b), restarts(a)), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, p := range running[:min(questionLimit, len(running))] {
		keys = append(keys, p.Namespace+"/"+p.Name)
	}
	return keys, len(running), nil
}

// countingTransport adds the bytes of every response body it reads to n.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err == nil {
		resp.Body = countingBody{resp.Body, t.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
