package cluster

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { os.Exit(RunTests(m)) }

// TestClusterStarts builds and starts a private cluster, seeds it, restarts
// it and shows that what was written before the restart is still there, and
// that clients made before the restart still work; then kills it and
// restarts it again.
func TestClusterStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs kube-apiserver")
	}
	ctx := t.Context()

	begin := time.Now()
	if _, err := Build(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("build: %v", time.Since(begin).Round(time.Millisecond))

	begin = time.Now()
	c, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("end of %s:\n%s", c.LogPath, c.Log(60))
		}
	})
	t.Logf("start to READY: %v (%s)", time.Since(begin).Round(time.Millisecond), c.Host)

	cs, dyn := c.Clients(t)
	begin = time.Now()
	seeded := SeedForTest(t, cs, dyn, SeedOptions{})
	t.Logf("seed: %v (%d pods, %d widgets)", time.Since(begin).Round(time.Millisecond), len(seeded.Pods), len(seeded.Widgets))
	checkSeeded(t, seeded)

	// What the API server lists is what Seed says it created.
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: SeedLabel + "=" + seeded.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != len(seeded.Pods) {
		t.Errorf("listed %d seeded pods, Seed returned %d", len(pods.Items), len(seeded.Pods))
	}

	before := seeded.Pods[0]
	widget := seeded.Widgets[0]
	host := c.Host
	begin = time.Now()
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart (stop + start to READY): %v", time.Since(begin).Round(time.Millisecond))
	if c.Host != host {
		t.Errorf("host changed across restart: %s, then %s", host, c.Host)
	}

	// The clientset made before the restart still works: same port, same
	// CA, same token.
	after, err := cs.CoreV1().Pods(before.Namespace).Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod created before the restart: %v", err)
	}
	if after.UID != before.UID || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("pod changed across restart: uid %s rv %s, then uid %s rv %s",
			before.UID, before.ResourceVersion, after.UID, after.ResourceVersion)
	}
	if after.Status.PodIP != before.Status.PodIP || after.Status.Phase != corev1.PodRunning {
		t.Errorf("pod status after restart: %s %s, want %s Running", after.Status.PodIP, after.Status.Phase, before.Status.PodIP)
	}
	w, err := dyn.Resource(WidgetGVR).Namespace(widget.GetNamespace()).Get(ctx, widget.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("widget created before the restart: %v", err)
	}
	if w.GetUID() != widget.GetUID() {
		t.Errorf("widget uid %s, then %s", widget.GetUID(), w.GetUID())
	}

	// Killed: gone at once, connections refused; restarted from what
	// etcd had written.
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if c.Running() || c.PID() != 0 {
		t.Error("killed, the cluster still says it runs")
	}
	if _, err := cs.CoreV1().Pods(before.Namespace).Get(ctx, before.Name, metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a request to the killed cluster: %v; expect connection refused", err)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if again, err := cs.CoreV1().Pods(before.Namespace).Get(ctx, before.Name, metav1.GetOptions{}); err != nil || again.UID != before.UID {
		t.Errorf("pod created before the kill, after the restart: %v", err)
	}
}

// checkSeeded asserts the shapes the e2e tests rely on.
func checkSeeded(t *testing.T, s *Seeded) {
	t.Helper()
	byIP := s.PodsByIP()

	// IP reuse: one Succeeded and one Running pod.
	reused := byIP[s.ReusedIP]
	phases := map[corev1.PodPhase]int{}
	for _, p := range reused {
		phases[p.Status.Phase]++
	}
	if len(reused) != 2 || phases[corev1.PodSucceeded] != 1 || phases[corev1.PodRunning] != 1 {
		t.Errorf("IP %s: %d pods, phases %v; want one Succeeded and one Running", s.ReusedIP, len(reused), phases)
	}

	// Host network: every node IP is the pod IP of two DaemonSet pods.
	for node, ip := range s.NodeIPs {
		pods := byIP[ip]
		if len(pods) != 2 {
			t.Errorf("node %s IP %s: %d pods, want 2", node, ip, len(pods))
		}
		for _, p := range pods {
			if !p.Spec.HostNetwork || p.Status.HostIP != ip || p.Spec.NodeName != node {
				t.Errorf("pod %s/%s on IP %s: hostNetwork %v hostIP %s node %s", p.Namespace, p.Name, ip, p.Spec.HostNetwork, p.Status.HostIP, p.Spec.NodeName)
			}
		}
	}

	// Dual stack: "api" pods have an IPv4 and an IPv6 address; every pod
	// is owned by a controller.
	dual := 0
	for _, p := range s.Pods {
		if len(p.Status.PodIPs) == 2 {
			dual++
		}
		if metav1.GetControllerOf(p) == nil {
			t.Errorf("pod %s/%s has no controller", p.Namespace, p.Name)
		}
	}
	if want := len(s.Namespaces) * 3; dual != want {
		t.Errorf("%d dual-stack pods, want %d", dual, want)
	}
	for _, svc := range s.Services {
		if svc.Name == "api" && len(svc.Spec.ClusterIPs) != 2 {
			t.Errorf("service %s/%s: clusterIPs %v, want two families", svc.Namespace, svc.Name, svc.Spec.ClusterIPs)
		}
	}
	if want := len(s.Namespaces)*2*3 + 2*len(s.Nodes) + 1; len(s.Pods) != want {
		t.Errorf("%d pods, want %d", len(s.Pods), want)
	}
}

// TestSharedCluster goes through StartForTest: the cluster TestMain shares,
// seeded under this test's own prefix.
func TestSharedCluster(t *testing.T) {
	c := StartForTest(t)
	if again := StartForTest(t); again != c {
		t.Fatal("StartForTest started a second shared cluster")
	}
	cs, dyn := c.Clients(t)
	s := SeedForTest(t, cs, dyn, SeedOptions{Namespaces: 1, Nodes: 1, Replicas: 1, Widgets: 2})
	list, err := dyn.Resource(WidgetGVR).Namespace(s.Namespaces[0]).List(t.Context(), metav1.ListOptions{LabelSelector: SeedLabel + "=" + s.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("%d widgets, want 2", len(list.Items))
	}
	if s.Prefix != "testsharedcluster" {
		t.Errorf("prefix %q", s.Prefix)
	}
}

func TestIPAlloc(t *testing.T) {
	a := &ipAlloc{block: 3}
	v4, v6 := a.pod()
	if v4 != "198.18.24.1" || v6 != "2001:db8::3:0:1" {
		t.Errorf("first pod IPs %s %s", v4, v6)
	}
	if got := a.node(0); got != "198.19.3.1" {
		t.Errorf("node 0 IP %s", got)
	}
}

func TestDNSLabel(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"TestFoo", "testfoo"},
		{"TestFoo/sub_case", "testfoo-sub-case"},
		{"9lives", "t9lives"},
		{"", "t"},
	} {
		if got := dnsLabel(tc.in); got != tc.want {
			t.Errorf("dnsLabel(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := dnsLabel("TestAVeryLongNameThatGoesOnAndOn/with_a_subtest_name_too")
	if len(long) > 40 {
		t.Errorf("dnsLabel of a long name: %q (%d chars)", long, len(long))
	}
}
