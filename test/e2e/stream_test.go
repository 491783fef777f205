package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// sseView is a client's view of one Server-Sent Events subscription: the
// objects it holds after applying every message, and every breach of the
// stream's promises (no gap, no duplicate, snapshot then SYNCED).
type sseView struct {
	mu      sync.Mutex
	objects map[string]string // key → resourceVersion
	synced  bool
	events  int
	broken  []string
	errs    []string // the ERROR messages, which end a stream
	ended   error
}

// subscribeSSE opens path (a ?watch=true URL) with Accept:
// text/event-stream and applies its messages until the test ends.
func subscribeSSE(t *testing.T, k *kubeindex, path string) *sseView {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	v := &sseView{objects: map[string]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		var data strings.Builder
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data.Len() > 0 {
					v.apply([]byte(data.String()))
					data.Reset()
				}
			case strings.HasPrefix(line, "data:"):
				data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			}
		}
		v.mu.Lock()
		v.ended = fmt.Errorf("the stream ended: %v", sc.Err())
		v.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return v
}

// apply applies one message, recording anything a correct stream never
// sends.
func (v *sseView) apply(data []byte) {
	var m struct {
		Type   string `json:"type"`
		Object struct {
			Metadata struct {
				Namespace       string `json:"namespace"`
				Name            string `json:"name"`
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		} `json:"object"`
		Reason string `json:"reason"`
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := json.Unmarshal(data, &m); err != nil {
		v.broken = append(v.broken, fmt.Sprintf("undecodable message %q: %v", data, err))
		return
	}
	v.events++
	md := m.Object.Metadata
	key := md.Namespace + "/" + md.Name
	_, held := v.objects[key]
	switch m.Type {
	case "ADDED":
		if held {
			v.broken = append(v.broken, "ADDED for "+key+", already held (a duplicate)")
		}
		v.objects[key] = md.ResourceVersion
	case "MODIFIED":
		if !v.synced || !held {
			v.broken = append(v.broken, fmt.Sprintf("MODIFIED for %s (held %v, synced %v): a gap", key, held, v.synced))
		}
		v.objects[key] = md.ResourceVersion
	case "DELETED":
		if !v.synced || !held {
			v.broken = append(v.broken, fmt.Sprintf("DELETED for %s (held %v, synced %v): a gap", key, held, v.synced))
		}
		delete(v.objects, key)
	case "SYNCED":
		if v.synced {
			v.broken = append(v.broken, "a second SYNCED")
		}
		v.synced = true
	case "BOOKMARK":
	case "ERROR":
		v.errs = append(v.errs, string(data))
		v.broken = append(v.broken, fmt.Sprintf("unexpected %s: %s", m.Type, data))
	default:
		v.broken = append(v.broken, fmt.Sprintf("unexpected %s: %s", m.Type, data))
	}
}

// matches is nil when the view is synced and holds exactly want.
func (v *sseView) matches(want []listEntry) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.broken) > 0 {
		return stopPolling{fmt.Errorf("the stream broke its promises: %s", strings.Join(v.broken, "; "))}
	}
	if v.ended != nil {
		return stopPolling{v.ended}
	}
	if !v.synced {
		return fmt.Errorf("no SYNCED yet (%d events)", v.events)
	}
	if d := cmp.Diff(want, entriesOf(v.objects)); d != "" {
		return fmt.Errorf("the stream's objects differ from the API server's (-API server +stream):\n%s", d)
	}
	return nil
}

// endedWith is nil once the stream has ended after an ERROR message
// whose text contains why.
func (v *sseView) endedWith(why string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ended == nil || len(v.errs) == 0 {
		return fmt.Errorf("the stream goes on (ended %v, ERROR messages %q)", v.ended, v.errs)
	}
	if last := v.errs[len(v.errs)-1]; !strings.Contains(last, why) {
		return stopPolling{fmt.Errorf("the stream ended with %s; expect it to say %q", last, why)}
	}
	return nil
}

// entriesOf is a client's objects (key → resourceVersion) as a sorted
// list, to compare with the API server's.
func entriesOf(objects map[string]string) []listEntry {
	got := make([]listEntry, 0, len(objects))
	for k, rv := range objects {
		got = append(got, listEntry{k, rv})
	}
	sortEntries(got)
	return got
}

// TestStreamRebuildsAPIServerState subscribes to pod events over SSE,
// unfiltered (one namespace) and by label, while pods are created,
// relabelled, updated and deleted through the API server: applying the
// snapshot and the events must rebuild exactly the API server's list.
func TestStreamRebuildsAPIServerState(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{Namespaces: 1, Nodes: 2, Replicas: 3, Widgets: 1})
	api := newAPIServer(t, c)
	k := startKubeindex(t, "--kubeconfig", c.Kubeconfig)
	ctx := t.Context()
	ns := seeded.Namespaces[0]
	pods := cs.CoreV1().Pods(ns)

	byNS := url.Values{"namespace": {ns}}
	web := url.Values{"namespace": {ns}, "labelSelector": {"app=web"}}
	webAPI := url.Values{"labelSelector": {"app=web"}}
	all := subscribeSSE(t, k, "/api/v1/pods?watch=true&"+byNS.Encode())
	webOnly := subscribeSSE(t, k, "/api/v1/pods?watch=true&"+web.Encode())
	agree := func(what string) {
		t.Helper()
		eventually(t, converge, what, func() error {
			want, err := api.list(ctx, podsR, ns, nil)
			if err != nil {
				return err
			}
			if err := all.matches(want); err != nil {
				return fmt.Errorf("namespace stream: %w", err)
			}
			if want, err = api.list(ctx, podsR, ns, webAPI); err != nil {
				return err
			}
			if err := webOnly.matches(want); err != nil {
				return fmt.Errorf("app=web stream: %w", err)
			}
			return nil
		})
	}
	agree("the snapshot to equal the API server's list")

	// Creates, a status update, a relabel out of and into the filter, and
	// deletes, back to back, then the views must agree again.
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}
	for i := range 3 {
		app := "web"
		if i == 2 {
			app = "stream"
		}
		if _, err := pods.Create(ctx, probePod(ns, fmt.Sprintf("stream-%d", i), map[string]string{"app": app}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := pods.Get(ctx, "stream-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = "Running"
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, app := range map[string]string{"stream-1": "elsewhere", "stream-2": "web"} {
		patch := []byte(`{"metadata":{"labels":{"app":"` + app + `"}}}`)
		if _, err := pods.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var seededWeb string
	for _, sp := range seeded.Pods {
		if sp.Namespace == ns && sp.Labels["app"] == "web" {
			seededWeb = sp.Name
			break
		}
	}
	for _, name := range []string{"stream-0", seededWeb} {
		if err := pods.Delete(ctx, name, now); err != nil {
			t.Fatal(err)
		}
	}
	agree("the streams to follow the API server's changes")
}
