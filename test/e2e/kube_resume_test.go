package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestKubeWatchResumeAcrossRestart is what an informer does when kubeindex
// restarts under it: it watches again from the last resourceVersion it had,
// which a freshly started kubeindex never holds (a pod was created and
// deleted since). From the moment kubeindex serves, still syncing, until
// after it is ready, every such watch must be refused (410 Expired, as an
// ERROR event or a status; a 429 with Retry-After, which the API server's
// watch cache answers while it initialises, or a 5xx: the client retries):
// never a stream that carries on from the present, which would silently
// drop the deletion.
func TestKubeWatchResumeAcrossRestart(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{Namespaces: 1, Nodes: 1, Replicas: 1, Widgets: 1})
	ctx := t.Context()
	l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	rv := l.ResourceVersion
	ns := seeded.Namespaces[0]
	gone := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/gone:1"}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, gone, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, gone.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}

	k := launchKubeindex(t, "--kubeconfig", c.Kubeconfig, "--config", writeFile(t, "kubeapi.yaml", kubeAPIConfig()))
	path := k8sPrefix + "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion=" + rv
	attempts := 0
	for ready := false; !ready; {
		r, _ := k.try("/readyz")
		ready = r.code == http.StatusOK // the attempt after this is the last
		attempts++
		if err := refusedResume(k.URL + path); err != nil {
			t.Fatalf("attempt %d (kubeindex ready: %v): GET %s: %v", attempts, ready, path, err)
		}
	}
	t.Logf("%d watches from resourceVersion %s, all refused", attempts, rv)
}

// refusedResume is nil when the watch at url is refused: an error status
// the client retries, or a stream whose first event is an ERROR with a 410.
func refusedResume(url string) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusGone || res.StatusCode >= 500 {
		return nil
	}
	// k8s.io/apiserver's cacher: "storage is (re)initializing".
	if res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") != "" {
		return nil
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		return fmt.Errorf("%d %s", res.StatusCode, b)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	if !sc.Scan() {
		return fmt.Errorf("200 and a stream that ended with no event (%v): the changes since the resourceVersion are silently lost", sc.Err())
	}
	var ev struct {
		Type   string `json:"type"`
		Object struct {
			Code int32 `json:"code"`
		} `json:"object"`
	}
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
		return fmt.Errorf("first line %q: %w", sc.Bytes(), err)
	}
	if ev.Type != "ERROR" || ev.Object.Code != http.StatusGone {
		return fmt.Errorf("first event %s, want ERROR 410 Expired: %s", ev.Type, strings.TrimSpace(sc.Text()))
	}
	return nil
}
