package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestStreamsMoveBetweenReplicas is two kubeindex replicas behind one
// Service: a client's reconnection lands on either. Positions are the API
// server's resourceVersions, so a stream resumed on the other replica
// continues where it left off. Replica B reads the API server through a
// proxy that delays everything by 700 ms, so every move from A to B
// resumes from a position B has not reached yet: B must wait for it, not
// tell the client to resync. The client hops between the two every few
// hundred milliseconds under churn, and the events it gets, between its
// first SYNCED and the end, must be exactly the API server's own watch
// events: no gap, no repeat, no resync.
func TestStreamsMoveBetweenReplicas(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{Namespaces: 1, Nodes: 1, Replicas: 2, Widgets: 1})
	api := newAPIServer(t, c)
	ctx := t.Context()
	ns := seeded.Namespaces[0]
	pods := cs.CoreV1().Pods(ns)

	a := startKubeindex(t, "--kubeconfig", c.Kubeconfig)
	px := startProxy(t, strings.TrimPrefix(c.Host, "https://"))
	px.setLag(700 * time.Millisecond)
	b := startKubeindex(t, "--kubeconfig", px.kubeconfigVia(t, c.Kubeconfig))

	// The oracle: the API server's own watch of the namespace from now on.
	start, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var oracle []string
	oracleDone := make(chan struct{})
	var omu sync.Mutex
	go func() {
		defer close(oracleDone)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error || ev.Type == watch.Bookmark {
				continue
			}
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			omu.Lock()
			oracle = append(oracle, fmt.Sprintf("%s %s/%s %s", ev.Type, m.GetNamespace(), m.GetName(), m.GetResourceVersion()))
			omu.Unlock()
		}
	}()

	// The client: synced on A first, then hopping.
	h := &hopper{ns: ns, b: b, objects: map[string]string{}}
	if err := h.follow(ctx, a, 0); err != nil || !h.synced {
		t.Fatalf("no SYNCED from replica A: %v", h.broken)
	}
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		churnPods(t, pods, ns, 45, 150*time.Millisecond)
	}()
	// The first move to B must resume from a position B holds. B's
	// history begins at its own list, and resourceVersions count every
	// write in the cluster (other tests' too), so the position A gave at
	// SYNCED may be older than B's list, and B rightly refuses it (as an
	// API server whose watch cache began later would, with a 410). The
	// churn begins after B has listed: follow A until its first event.
	eventually(t, converge, "the client on A to see the churn begin", func() error {
		if err := h.follow(ctx, a, 400*time.Millisecond); err != nil {
			return err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.events) == 0 {
			return fmt.Errorf("no event yet")
		}
		return nil
	})
	replicas := []*kubeindex{b, a}
	hops := 0
	for done := false; !done; hops++ {
		select {
		case <-churned:
			done = true
		default:
		}
		if err := h.follow(ctx, replicas[hops%2], 400*time.Millisecond); err != nil {
			h.broken = append(h.broken, err.Error())
		}
		if len(h.broken) > 0 || hops > 200 {
			break
		}
	}
	// The last hops, until the client holds the API server's state.
	eventually(t, converge, "the hopping client to hold the API server's pods", func() error {
		if err := h.follow(ctx, replicas[hops%2], 400*time.Millisecond); err != nil {
			h.broken = append(h.broken, err.Error())
		}
		hops++
		want, err := api.list(ctx, podsR, ns, nil)
		if err != nil {
			return err
		}
		return h.holds(want)
	})
	if h.resyncs > 0 {
		t.Errorf("%d resumes were refused (%s): a move between replicas must continue the stream", h.resyncs, h.lastReason)
	}
	// Every event, as the API server sent them.
	eventually(t, converge, "the client's events to be the API server's", func() error {
		omu.Lock()
		defer omu.Unlock()
		if d := cmp.Diff(oracle, h.events); d != "" {
			return fmt.Errorf("the client's events differ from the API server's watch (-API server +client):\n%s", d)
		}
		return nil
	})
	t.Logf("%d hops, %d resumes on B, %d events, each once", hops, h.resumesOnB, len(h.events))
	if h.resumesOnB < 5 || len(h.events) < 45 {
		t.Errorf("%d resumes on B, %d events: too few to prove anything", h.resumesOnB, len(h.events))
	}
}

// churnPods makes n changes in ns, one every pace: creates, relabels and
// deletes.
func churnPods(t *testing.T, pods typedcorev1.PodInterface, ns string, n int, pace time.Duration) {
	ctx := context.Background()
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}
	for i := range n {
		var err error
		switch {
		case i%3 == 1:
			_, err = pods.Patch(ctx, fmt.Sprint("hop-", i-1), types.MergePatchType, []byte(`{"metadata":{"labels":{"step":"`+strconv.Itoa(i)+`"}}}`), metav1.PatchOptions{})
		case i%3 == 2 && i%2 == 0:
			err = pods.Delete(ctx, fmt.Sprint("hop-", i-2), now)
		default:
			_, err = pods.Create(ctx, probePod(ns, fmt.Sprint("hop-", i), map[string]string{"app": "hop"}), metav1.CreateOptions{})
		}
		if err != nil {
			t.Errorf("churn step %d: %v", i, err)
		}
		time.Sleep(pace) // a pace, not a wait
	}
}

// hopper is a client of the pods of one namespace that reconnects, each
// time to the replica it is given, from the last position it got.
type hopper struct {
	mu         sync.Mutex // guards the rest, for a checker reading while it follows
	ns         string
	b          *kubeindex        // the replica behind
	objects    map[string]string // key → resourceVersion
	pos        string            // the last id: where to resume
	synced     bool
	events     []string // after the first SYNCED: "TYPE ns/name rv"
	resyncs    int
	lastReason string
	resumesOnB int
	broken     []string
}

// follow connects to k and applies its messages for d (0: until SYNCED;
// negative: until the stream ends). An error is a connection that was
// refused or answered with an error status: nothing was applied.
func (h *hopper) follow(ctx context.Context, k *kubeindex, d time.Duration) error {
	q := url.Values{"watch": {"true"}, "namespace": {h.ns}}
	h.mu.Lock()
	pos := h.pos
	h.mu.Unlock()
	if pos != "" {
		q.Set("resourceVersion", pos)
	}
	ctx, cancel := context.WithTimeout(ctx, converge)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.URL+"/api/v1/pods?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", req.URL, res.StatusCode)
	}
	if pos != "" && k == h.b {
		h.mu.Lock()
		h.resumesOnB++
		h.mu.Unlock()
	}
	if d > 0 {
		time.AfterFunc(d, cancel)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var id, data string
	hasID := false
	for sc.Scan() {
		line := sc.Text()
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if data != "" {
				more, synced := h.apply(data, id, hasID)
				if !more || d == 0 && synced {
					return nil
				}
			}
			id, data, hasID = "", "", false
		case field == "id":
			id, hasID = value, true
		case field == "data":
			data = value
		}
	}
	return nil
}

// apply applies one message and moves the position to its id if it has
// one; more is false when the connection must end.
func (h *hopper) apply(data, id string, hasID bool) (more, synced bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.applyLocked(data) {
		return false, h.synced
	}
	if hasID {
		h.pos = id
	}
	return true, h.synced
}

func (h *hopper) applyLocked(data string) bool {
	var m struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
		Object struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		h.broken = append(h.broken, fmt.Sprintf("undecodable %q: %v", data, err))
		return false
	}
	md := m.Object.Metadata
	key := md.Namespace + "/" + md.Name
	held, ok := h.objects[key]
	switch m.Type {
	case "SYNCED":
		h.synced = true
	case "BOOKMARK":
	case "RESYNC_REQUIRED":
		h.resyncs++
		h.lastReason = m.Reason
		h.objects, h.pos, h.synced = map[string]string{}, "", false
		return false
	case "ADDED", "MODIFIED", "DELETED":
		if h.synced {
			h.events = append(h.events, fmt.Sprintf("%s %s %s", m.Type, key, md.ResourceVersion))
			if m.Type == "ADDED" && ok || m.Type != "ADDED" && !ok {
				h.broken = append(h.broken, fmt.Sprintf("%s for %s (held: %v)", m.Type, key, ok))
			}
			if ok && rvNumber(md.ResourceVersion) <= rvNumber(held) {
				h.broken = append(h.broken, fmt.Sprintf("%s for %s at %s, held at %s: a repeat", m.Type, key, md.ResourceVersion, held))
			}
		}
		if m.Type == "DELETED" {
			delete(h.objects, key)
		} else {
			h.objects[key] = md.ResourceVersion
		}
	default:
		h.broken = append(h.broken, "unexpected "+data)
	}
	return true
}

func rvNumber(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}

// holds is nil when the client is synced, has kept every promise, and
// holds exactly want.
func (h *hopper) holds(want []listEntry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.broken) > 0 {
		return stopPolling{fmt.Errorf("the stream broke its promises: %s", strings.Join(h.broken, "; "))}
	}
	if !h.synced {
		return fmt.Errorf("not synced (%d resyncs)", h.resyncs)
	}
	if d := cmp.Diff(want, entriesOf(h.objects)); d != "" {
		return fmt.Errorf("the client's pods differ from the API server's (-API server +client):\n%s", d)
	}
	return nil
}
