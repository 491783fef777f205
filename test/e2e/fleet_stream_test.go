package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// fleetView is a client's view of one stream across clusters: each
// cluster's pod names, the resume token last seen, the CLUSTER messages,
// and every breach of the stream's promises.
type fleetView struct {
	mu     sync.Mutex
	pods   map[string]map[string]bool // cluster → namespace/name
	synced map[string]bool
	resume string
	states []string // "cluster status state"
	broken []string
}

func newFleetView(held map[string]map[string]bool) *fleetView {
	v := &fleetView{pods: map[string]map[string]bool{}, synced: map[string]bool{}}
	for c, pods := range held {
		v.pods[c] = cloneSet(pods)
	}
	return v
}

func cloneSet(s map[string]bool) map[string]bool {
	out := make(map[string]bool, len(s))
	for k, b := range s {
		out[k] = b
	}
	return out
}

func (v *fleetView) apply(data []byte) {
	var m struct {
		Cluster, Type, Resume string
		Status                int
		State                 string
		Object                *struct {
			Metadata struct{ Namespace, Name, Cluster string }
			Cluster  *string
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := json.Unmarshal(data, &m); err != nil || m.Cluster == "" {
		v.broken = append(v.broken, fmt.Sprintf("a message without its cluster: %.200s", data))
		return
	}
	if m.Resume != "" {
		v.resume = m.Resume
	}
	if m.Object != nil && m.Object.Cluster != nil {
		v.broken = append(v.broken, "the cluster inside the object")
	}
	if v.pods[m.Cluster] == nil {
		v.pods[m.Cluster] = map[string]bool{}
	}
	pods := v.pods[m.Cluster]
	key := ""
	if m.Object != nil {
		key = m.Object.Metadata.Namespace + "/" + m.Object.Metadata.Name
	}
	switch m.Type {
	case "CLUSTER":
		v.states = append(v.states, fmt.Sprintf("%s %d %s", m.Cluster, m.Status, m.State))
	case "ADDED":
		if pods[key] {
			v.broken = append(v.broken, "ADDED twice: "+m.Cluster+" "+key)
		}
		pods[key] = true
	case "MODIFIED":
		if !pods[key] {
			v.broken = append(v.broken, "MODIFIED before ADDED: "+m.Cluster+" "+key)
		}
	case "DELETED":
		if !pods[key] {
			v.broken = append(v.broken, "DELETED before ADDED: "+m.Cluster+" "+key)
		}
		delete(pods, key)
	case "SYNCED": // once a cluster, and again only after its RESYNC_REQUIRED
		if v.synced[m.Cluster] {
			v.broken = append(v.broken, "SYNCED twice: "+m.Cluster)
		}
		v.synced[m.Cluster] = true
	case "RESYNC_REQUIRED":
		v.pods[m.Cluster] = map[string]bool{}
		v.synced[m.Cluster] = false
	case "BOOKMARK":
	default:
		v.broken = append(v.broken, fmt.Sprintf("unexpected %.200s", data))
	}
}

// holds is nil when the view holds exactly want in each cluster.
func (v *fleetView) holds(want map[string][]string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.broken) > 0 {
		return stopPolling{fmt.Errorf("the stream broke its promises: %s", strings.Join(v.broken, "; "))}
	}
	for c, names := range want {
		var got []string
		for key := range v.pods[c] {
			got = append(got, key)
		}
		slices.Sort(got)
		if !slices.Equal(got, names) {
			return fmt.Errorf("%s: %v, expect %v", c, got, names)
		}
	}
	return nil
}

func (v *fleetView) saw(state string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !slices.Contains(v.states, state) {
		return fmt.Errorf("CLUSTER messages %v, expect %q", v.states, state)
	}
	return nil
}

func (v *fleetView) held() (map[string]map[string]bool, string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]map[string]bool{}
	for c, p := range v.pods {
		out[c] = cloneSet(p)
	}
	return out, v.resume
}

// followFleet opens path as Server-Sent Events (resuming from token when
// given) and applies its messages to v; the returned function ends it.
func followFleet(t *testing.T, k *kubeindex, path, token string, v *fleetView) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Last-Event-ID", token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				v.apply([]byte(data))
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// TestFleetStreamAcrossTwoAPIServers: one event stream over two real API
// servers holding the same pod names: each pod arrives beside its
// cluster; a resume with the stream's token after changes in both gives
// each cluster exactly what it missed; when one API server goes away,
// the stream says it is stale and the other keeps streaming.
func TestFleetStreamAcrossTwoAPIServers(t *testing.T) {
	eastAPI := cluster.StartForTest(t)
	westAPI := cluster.StartPrivateForTest(t)
	eastCS, _ := eastAPI.Clients(t)
	westCS, _ := westAPI.Clients(t)
	const ns = "fleet-stream"
	apis := map[string]kubernetes.Interface{"east": eastCS, "west": westCS}
	for _, cs := range apis {
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// No controller manager makes the namespace's service account.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	k := startKubeindex(t, "--resources", "pods,namespaces", "--stale-after", "2s",
		"--cluster", "name=east,kubeconfig="+eastAPI.Kubeconfig, "--cluster", "name=west,kubeconfig="+westAPI.Kubeconfig)
	pod := func(cluster, name string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := apis[cluster].CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const path = "/api/v1/pods?watch=true&namespace=" + ns

	v := newFleetView(nil)
	stop := followFleet(t, k, path, "", v)
	pod("east", "p-1")
	pod("west", "p-1")
	eventually(t, converge, "p-1 in each cluster, beside its cluster", func() error {
		return v.holds(map[string][]string{"east": {ns + "/p-1"}, "west": {ns + "/p-1"}})
	})
	held, token := v.held()
	stop()
	if token == "" {
		t.Fatal("no resume token")
	}

	// Changes in both while away; the token resumes each cluster.
	pod("east", "p-2")
	pod("west", "p-2")
	pod("west", "p-3")
	if err := eastCS.CoreV1().Pods(ns).Delete(t.Context(), "p-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	v2 := newFleetView(held)
	followFleet(t, k, path, token, v2)
	eventually(t, converge, "each cluster's changes, once, after the resume", func() error {
		return v2.holds(map[string][]string{"east": {ns + "/p-2"}, "west": {ns + "/p-1", ns + "/p-2", ns + "/p-3"}})
	})

	// West's API server goes away: the stream says west is stale, and
	// east streams on.
	if err := westAPI.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, readyTimeout, "west reported stale in the stream", func() error { return v2.saw("west 200 stale") })
	pod("east", "p-4")
	eventually(t, converge, "east streams on", func() error {
		return v2.holds(map[string][]string{"east": {ns + "/p-2", ns + "/p-4"}})
	})
}
