package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// fleetState is GET /api/v1/clusters.
type fleetState struct {
	Clusters []struct {
		Name, State, Reason string
		Objects             int64
	}
}

func (k *kubeindex) clusterState(name string) (state, reason string, err error) {
	var fs fleetState
	if err := k.getJSON("/api/v1/clusters", &fs); err != nil {
		return "", "", err
	}
	for _, c := range fs.Clusters {
		if c.Name == name {
			return c.State, c.Reason, nil
		}
	}
	return "", "", fmt.Errorf("cluster %q not listed: %+v", name, fs)
}

// TestFleetOfThreeAPIServers: one kubeindex, its clusters given by a
// watched configuration file, serves three real API servers as east, west
// and south; east and west were seeded with the same pod addresses
// (overlapping pod CIDRs), south is reached through a proxy that can hang.
// Through each cluster's prefix, kubectl prints what that API server
// prints and a client-go informer holds what it holds, changes included,
// and nothing of the others; a list and counts across clusters are the
// union of the API servers' lists; an address held in east and west is
// answered as held in both. Then, in order: west's API server is killed
// and comes back, south's connection hangs and heals, and south is
// removed from the file and added again, while streams are open on the
// other clusters (fleet_failure_test.go, fleet_config_test.go). One
// fleet serves the whole scenario.
func TestFleetOfThreeAPIServers(t *testing.T) {
	f := startFleet(t)
	k := f.k
	for _, m := range f.members {
		if state, reason, err := k.clusterState(m.name); err != nil || state != "synced" {
			t.Fatalf("%s once ready: %s %s %v; expect synced", m.name, state, reason, err)
		}
	}

	for _, m := range f.members {
		t.Run("kubectl "+m.name, func(t *testing.T) {
			p := f.kubectl(t, m)
			p.same(t, tableCells, "get", "pods", "-A", "-o", "wide")
			p.same(t, tableCells, "get", "namespaces")
			p.same(t, asIs, "get", "pods", "-n", m.seeded.Namespaces[0], "-o", "json")
		})
	}

	t.Run("an address across clusters is answered by every cluster holding it", func(t *testing.T) {
		east, west, south := f.member("east"), f.member("west"), f.member("south")
		if east.seeded.IPBlock != west.seeded.IPBlock || east.seeded.IPBlock == south.seeded.IPBlock {
			t.Fatalf("seeded address blocks east %d, west %d, south %d: expect east's and west's the same, south's its own",
				east.seeded.IPBlock, west.seeded.IPBlock, south.seeded.IPBlock)
		}
		// Overlapping pod CIDRs: the seeds gave west's pods east's addresses.
		if held := fleetIP(t, k, west.seeded.Pods[0].Status.PodIP, f.oracles()); !slices.Equal(held, []string{"east", "west"}) {
			t.Errorf("%s held in %v; expect east and west", west.seeded.Pods[0].Status.PodIP, held)
		}
		if held := fleetIP(t, k, south.seeded.Pods[0].Status.PodIP, f.oracles()); !slices.Equal(held, []string{"south"}) {
			t.Errorf("%s held in %v; expect south alone", south.seeded.Pods[0].Status.PodIP, held)
		}
		// One more address in two clusters, made while serving.
		const twin = "198.51.100.7"
		for _, m := range []*fleetAPI{east, south} {
			podAt(t, m.cs, m.seeded.Namespaces[0], "fleet-twin", twin)
		}
		if held := fleetIP(t, k, twin, f.oracles()); !slices.Equal(held, []string{"east", "south"}) {
			t.Errorf("%s held in %v; expect east and south", twin, held)
		}
	})
	t.Run("a list and counts across clusters are the union of the API servers'", func(t *testing.T) {
		fleetUnion(t, k, f.oracles())
		fleetStatusCounts(t, k, f.apiKubectls(t))
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	informerOf := func(name string) toolscache.SharedIndexInformer {
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: k.URL + "/clusters/" + name + k8sPrefix, QPS: -1})
		if err != nil {
			t.Fatal(err)
		}
		inf := informers.NewSharedInformerFactory(cs, 0).Core().V1().Pods().Informer()
		go inf.Run(ctx.Done())
		return inf
	}
	infs := map[string]toolscache.SharedIndexInformer{}
	for _, m := range f.members {
		infs[m.name] = informerOf(m.name)
	}
	for _, m := range f.members {
		if !toolscache.WaitForCacheSync(withTimeout(t, readyTimeout), infs[m.name].HasSynced) {
			t.Fatalf("%s's informer did not sync through its prefix", m.name)
		}
		eventually(t, converge, m.name+"'s informer holding its API server's pods", func() error {
			return sameKeys(ctx, m.cs, infs[m.name])
		})
	}
	// A pod made in west reaches west's informer, never another's.
	west := f.member("west")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fleet-probe", Namespace: west.seeded.Namespaces[0]},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := west.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "the new pod in west's informer", func() error {
		if _, ok, _ := infs["west"].GetStore().GetByKey(pod.Namespace + "/" + pod.Name); !ok {
			return fmt.Errorf("not there yet")
		}
		return nil
	})
	for _, name := range []string{"east", "south"} {
		if _, ok, _ := infs[name].GetStore().GetByKey(pod.Namespace + "/" + pod.Name); ok {
			t.Errorf("west's pod reached %s's informer", name)
		}
	}
	cancel()

	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"west killed: the others unaffected, west stale with the reason, then recovered", f.westKilled},
		{"south hung: the others unaffected, south stale with the reason, then recovered", f.southHung},
		{"south removed and added through the configuration file while clients stream", f.southReconfigured},
	} {
		if !t.Run(step.name, step.run) {
			t.FailNow()
		}
	}

	t.Run("each cluster authorizes against its own API server", func(t *testing.T) {
		fleetAuthorization(t, f.member("east").c, f.member("east").cs, west.c)
	})
}

// fleetAuthorization: alice, known by the fleet's one token file, may list
// pods in east (a ClusterRoleBinding there) and nothing in west: east's
// pods are hers, west's are 403, and who she is is asked once.
func fleetAuthorization(t *testing.T, eastAPI *cluster.Cluster, eastCS kubernetes.Interface, westAPI *cluster.Cluster) {
	ctx := t.Context()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fleet-pod-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	if _, err := eastCS.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fleet-pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
	if _, err := eastCS.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tokens := writeFile(t, "tokens.csv", "alice-token,alice,1001\n")
	k := startKubeindex(t, "--resources", "pods,namespaces", "--auth=token", "--token-file", tokens, "--authz=rbac",
		"--cluster", "name=east,kubeconfig="+eastAPI.Kubeconfig, "--cluster", "name=west,kubeconfig="+westAPI.Kubeconfig)
	ask := func(path, token string) (int, string) {
		req, err := http.NewRequest("GET", k.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	eventually(t, converge, "alice's pods in east", func() error {
		if code, body := ask("/clusters/east/api/v1/pods?limit=1", "alice-token"); code != 200 || !strings.Contains(body, `"kind":"PodList"`) {
			return fmt.Errorf("east: %d %.200s", code, body)
		}
		return nil
	})
	for _, tc := range []struct {
		path, token string
		code        int
	}{
		{"/clusters/west/api/v1/pods?limit=1", "alice-token", 403},
		{"/clusters/west/k8s/api/v1/pods", "alice-token", 403},
		{"/clusters/east/api/v1/pods?limit=1", "", 401},
		{"/clusters/nowhere/api/v1/pods", "", 401},
		{"/api/v1/clusters", "", 401},
		{"/api/v1/clusters", "alice-token", 200},
	} {
		if code, body := ask(tc.path, tc.token); code != tc.code {
			t.Errorf("GET %s (token %q): %d %.200s; expect %d", tc.path, tc.token, code, body, tc.code)
		}
	}
}

// sameKeys compares an informer's pods with the API server's, by key and
// resourceVersion.
func sameKeys(ctx context.Context, cs kubernetes.Interface, inf toolscache.SharedIndexInformer) error {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return stopPolling{err}
	}
	var want, got []string
	for _, p := range list.Items {
		want = append(want, p.Namespace+"/"+p.Name+"@"+p.ResourceVersion)
	}
	for _, o := range inf.GetStore().List() {
		p := o.(*corev1.Pod)
		got = append(got, p.Namespace+"/"+p.Name+"@"+p.ResourceVersion)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		return fmt.Errorf("informer %d pods, API server %d:\n%s\n%s", len(got), len(want), strings.Join(got, " "), strings.Join(want, " "))
	}
	return nil
}

func withTimeout(t *testing.T, d time.Duration) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx.Done()
}

func oracles(east, west kubernetes.Interface) map[string]kubernetes.Interface {
	return map[string]kubernetes.Interface{"east": east, "west": west}
}

// fleetIP: GET /api/v1/clusters/ip/{ip} names, in heldIn, exactly the
// clusters whose API server has a pod reporting the address (several,
// where pod CIDRs overlap), in configuration order, with a slot for each
// of kubeindex's clusters. It returns heldIn.
func fleetIP(t *testing.T, k *kubeindex, ip string, apis map[string]kubernetes.Interface) []string {
	t.Helper()
	names := k.clusterNames(t)
	var want []string
	for _, name := range names {
		if apis[name] == nil {
			continue
		}
		pods, err := apis[name].CoreV1().Pods("").List(t.Context(), metav1.ListOptions{FieldSelector: "status.podIP=" + ip})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) > 0 {
			want = append(want, name)
		}
	}
	if len(want) == 0 {
		t.Fatalf("no API server has a pod at %s", ip)
	}
	eventually(t, converge, "the clusters holding "+ip, func() error {
		var got struct {
			HeldIn   []string
			Clusters []struct {
				Cluster string
				Status  int
			}
		}
		if err := k.getJSON("/api/v1/clusters/ip/"+ip, &got); err != nil {
			return err
		}
		if !slices.Equal(got.HeldIn, want) || len(got.Clusters) != len(names) {
			return fmt.Errorf("held in %v (%+v); the API servers say %v", got.HeldIn, got.Clusters, want)
		}
		return nil
	})
	t.Logf("%s is held in %v", ip, want)
	return want
}

// clusterNames is kubeindex's clusters in configuration order.
func (k *kubeindex) clusterNames(t testing.TB) []string {
	t.Helper()
	var fs fleetState
	if err := k.getJSON("/api/v1/clusters", &fs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range fs.Clusters {
		names = append(names, c.Name)
	}
	return names
}

// podAt makes a running pod that reports ip (no kubelet sets it here).
func podAt(t *testing.T, cs kubernetes.Interface, ns, name, ip string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	made, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	made.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(t.Context(), made, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
