package browser

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestDashboardAgainstAPIServer runs kubeindex against the real test
// cluster (etcd and kube-apiserver) and holds the dashboard to the API
// server: the pods table counts what the API server lists; a pod created
// through the API server appears, its IP is found, and once deleted it
// vanishes; a node IP is shown as shared by its hostNetwork pods; and when
// the API server stops, the dashboard says the cache is STALE.
func TestDashboardAgainstAPIServer(t *testing.T) {
	p := newPage(t) // first: without chromium, skip before building anything
	c := cluster.StartPrivateForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ki := startKubeindex(t, "--kubeconfig", c.Kubeconfig, "--stale-after", "2s")
	p.run("opening the dashboard", chromedp.Navigate(ki.URL+"/#/pods"))

	p.waitFor(60*time.Second, "the pods table to match the API server", tableMatches(t, p, cs))
	if s := p.state(); s.Simulated {
		t.Errorf("the SIMULATED badge is shown against a real API server: %v", s)
	}

	ns := seeded.Namespaces[0]
	key := ns + "/browser-probe"
	pod := createProbe(t, cs, ns)
	p.setValue("#quick", "browser-probe")
	p.waitFor(30*time.Second, "the created pod's row to appear", rowPresent(p, key, true))
	p.waitFor(30*time.Second, "the table to count the new pod", tableMatches(t, p, cs))

	// Give the pod an address, as a kubelet would, and look it up.
	const probeIP = "192.0.2.77"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: probeIP, PodIPs: []corev1.PodIP{{IP: probeIP}}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lookUp(t, p, probeIP, "pod", []string{key}, false)

	// A node's address: its hostNetwork pods, as the API server has them.
	var nodeIP string
	for _, ip := range seeded.NodeIPs {
		nodeIP = ip
		break
	}
	var hostPods []string
	for _, hp := range seeded.PodsByIP()[nodeIP] {
		hostPods = append(hostPods, hp.Namespace+"/"+hp.Name)
	}
	slices.Sort(hostPods)
	lookUp(t, p, nodeIP, "hostNetwork", hostPods, true)

	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).Delete(t.Context(), "browser-probe", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	p.waitFor(30*time.Second, "the deleted pod's row to vanish", rowPresent(p, key, false))
	p.setValue("#quick", "")
	p.waitFor(30*time.Second, "the table to match the API server after the delete", tableMatches(t, p, cs))
	p.screenshot("dashboard-cluster")

	// Stop blocks until the process is gone (and kills it after a minute
	// if it does not exit): watch for the badge meanwhile.
	stopped := make(chan error, 1)
	stopAt := time.Now()
	go func() { stopped <- c.Stop() }()
	var stale struct {
		Nav    string
		Badge  string
		Banner string
	}
	p.waitFor(90*time.Second, "the dashboard to say pods are STALE", func() (bool, string) {
		p.mustEval(`(() => { `+visibleJS+` const a = document.querySelector('.res[data-resource="pods"]');
			const badge = a?.querySelector('.badge-stale');
			const b = document.getElementById('stale-banner');
			return {nav: a?.dataset.stale ?? '', badge: shown(badge) ? badge.textContent : '',
				banner: shown(b) ? b.textContent : ''}; })()`, &stale)
		return stale.Nav == "true" && stale.Badge == "STALE" && len(stale.Banner) > 0, fmt.Sprintf("%+v", stale)
	})
	t.Logf("STALE shown %v after stopping the API server; banner: %s", time.Since(stopAt).Round(time.Second), stale.Banner)
	p.screenshot("dashboard-cluster-stale")
	if err := <-stopped; err != nil {
		// Not the dashboard's concern: the badge was checked either way.
		t.Logf("stopping the test cluster: %v", err)
	}
	p.checkProblems()
}

// tableMatches compares the table's count with the pods the API server
// lists.
func tableMatches(t *testing.T, p *page, cs kubernetes.Interface) func() (bool, string) {
	return func() (bool, string) {
		list, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing pods from the API server: %v", err)
		}
		s := p.state()
		return s.Stream == "live" && s.Count == len(list.Items),
			fmt.Sprintf("API server: %d pods; page: %v", len(list.Items), s)
	}
}

func rowPresent(p *page, key string, want bool) func() (bool, string) {
	return func() (bool, string) {
		var found bool
		p.mustEval(`!!document.querySelector('.vt-body .vt-row[data-key=`+jsString(key)+`]')`, &found)
		return found == want, p.state().String()
	}
}

func createProbe(t *testing.T, cs kubernetes.Interface, ns string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "browser-probe", Namespace: ns, Labels: map[string]string{"app": "browser-probe"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}},
	}
	created, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// lookUp types ip into the IP box and checks the match kind and the pods
// listed (in any order), each marked hostNetwork or not as expected.
func lookUp(t *testing.T, p *page, ip, match string, keys []string, hostNetwork bool) {
	t.Helper()
	p.setValue("#ip-input", "")
	p.run("typing "+ip, chromedp.SendKeys("#ip-input", ip+kb.Enter, chromedp.ByQuery))
	var got struct {
		Match string
		Keys  []string
		Hosts []string
	}
	p.waitFor(30*time.Second, "the IP lookup of "+ip+" to show "+match, func() (bool, string) {
		p.mustEval(`(() => { `+visibleJS+` const r = document.getElementById('ip-result'); const rows = [...r.querySelectorAll('tbody tr[data-kind="Pod"]')];
			return {match: shown(r) ? r.dataset.match : '', keys: rows.map((tr) => tr.dataset.key).sort(),
				hosts: rows.map((tr) => tr.dataset.hostNetwork)}; })()`, &got)
		return got.Match == match && slices.Equal(got.Keys, keys), fmt.Sprintf("%+v", got)
	})
	for i, h := range got.Hosts {
		if h != fmt.Sprint(hostNetwork) {
			t.Errorf("IP %s: row %d marked hostNetwork=%s; expect %v", ip, i, h, hostNetwork)
		}
	}
}
