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

// TestFleetOfTwoAPIServers: one kubeindex serves two real API servers as
// the clusters east and west. Through each cluster's prefix, kubectl prints
// what that API server prints and a client-go informer holds what it
// holds, changes included, and nothing of the other; when west's API
// server is stopped, west is stale with a reason while east answers as
// before, and west recovers when its API server returns. A list and
// counts across both are the union of the API servers' lists.
func TestFleetOfTwoAPIServers(t *testing.T) {
	eastAPI := cluster.StartForTest(t)
	westAPI := cluster.StartPrivateForTest(t)
	eastCS, eastDyn := eastAPI.Clients(t)
	westCS, westDyn := westAPI.Clients(t)
	cluster.SeedForTest(t, eastCS, eastDyn, cluster.SeedOptions{})
	west := cluster.SeedForTest(t, westCS, westDyn, cluster.SeedOptions{Namespaces: 1})

	k := startKubeindex(t, "--resources", "pods,namespaces,nodes", "--stale-after", "2s",
		"--cluster", "name=east,kubeconfig="+eastAPI.Kubeconfig, "--cluster", "name=west,kubeconfig="+westAPI.Kubeconfig)
	for _, name := range []string{"east", "west"} {
		if state, reason, err := k.clusterState(name); err != nil || state != "synced" {
			t.Fatalf("%s once ready: %s %s %v; expect synced", name, state, reason, err)
		}
	}

	pairs := map[string]kubectlPair{
		"east": {api: newKubectl(t, "east API server", eastAPI.Kubeconfig), ki: newKubectl(t, "kubeindex east", kubeconfigFor(t, k.URL+"/clusters/east"+k8sPrefix))},
		"west": {api: newKubectl(t, "west API server", westAPI.Kubeconfig), ki: newKubectl(t, "kubeindex west", kubeconfigFor(t, k.URL+"/clusters/west"+k8sPrefix))},
	}
	for name, p := range pairs {
		t.Run("kubectl "+name, func(t *testing.T) {
			p.same(t, tableCells, "get", "pods", "-A", "-o", "wide")
			p.same(t, tableCells, "get", "namespaces")
			p.same(t, asIs, "get", "pods", "-n", west.Namespaces[0], "-o", "json")
		})
	}

	t.Run("an address across clusters is answered by every cluster holding it", func(t *testing.T) {
		fleetIP(t, k, west.Pods[0].Status.PodIP, oracles(eastCS, westCS))
		// Overlapping pod CIDRs: one address held in both.
		const twin = "198.51.100.7"
		for _, cs := range []kubernetes.Interface{eastCS, westCS} {
			podAt(t, cs, west.Namespaces[0], "fleet-twin", twin)
		}
		fleetIP(t, k, twin, oracles(eastCS, westCS))
	})
	t.Run("a list and counts across clusters are the union of the API servers'", func(t *testing.T) {
		fleetUnion(t, k, oracles(eastCS, westCS))
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
	infs := map[string]toolscache.SharedIndexInformer{"east": informerOf("east"), "west": informerOf("west")}
	oracles := oracles(eastCS, westCS)
	for name, inf := range infs {
		if !toolscache.WaitForCacheSync(withTimeout(t, readyTimeout), inf.HasSynced) {
			t.Fatalf("%s's informer did not sync through its prefix", name)
		}
		eventually(t, converge, name+"'s informer holding its API server's pods", func() error {
			return sameKeys(ctx, oracles[name], inf)
		})
	}
	// A pod made in west reaches west's informer, never east's.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fleet-probe", Namespace: west.Namespaces[0]},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := westCS.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "the new pod in west's informer", func() error {
		if _, ok, _ := infs["west"].GetStore().GetByKey(pod.Namespace + "/" + pod.Name); !ok {
			return fmt.Errorf("not there yet")
		}
		return nil
	})
	if _, ok, _ := infs["east"].GetStore().GetByKey(pod.Namespace + "/" + pod.Name); ok {
		t.Error("west's pod reached east's informer")
	}

	// West's API server goes away: west is stale, with a reason; east
	// answers as before.
	if err := westAPI.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, readyTimeout, "west stale", func() error {
		state, reason, err := k.clusterState("west")
		if err != nil || state != "stale" || reason == "" {
			return fmt.Errorf("west: %s (%s) %v", state, reason, err)
		}
		return nil
	})
	if state, _, _ := k.clusterState("east"); state != "synced" {
		t.Errorf("east while west is down: %s", state)
	}
	pairs["east"].same(t, tableCells, "get", "pods", "-A", "-o", "wide")
	if got := k.get(t, "/clusters/west/api/v1/pods?limit=1"); got.code != 200 {
		t.Errorf("stale west answers from memory: %d", got.code)
	}

	restartCtx, cancelRestart := context.WithTimeout(context.Background(), cluster.DefaultStartTimeout)
	defer cancelRestart()
	if err := westAPI.Restart(restartCtx); err != nil {
		t.Fatal(err)
	}
	eventually(t, readyTimeout, "west synced again", func() error {
		if state, reason, err := k.clusterState("west"); err != nil || state != "synced" {
			return fmt.Errorf("west: %s (%s) %v", state, reason, err)
		}
		return nil
	})
	pairs["west"].same(t, tableCells, "get", "pods", "-A", "-o", "wide")

	t.Run("each cluster authorizes against its own API server", func(t *testing.T) {
		fleetAuthorization(t, eastAPI, eastCS, westAPI)
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
// clusters whose API server has a pod reporting the address (both, where
// the seeds gave the same addresses), each slot its cluster's own answer.
func fleetIP(t *testing.T, k *kubeindex, ip string, apis map[string]kubernetes.Interface) {
	var want []string
	for _, name := range []string{"east", "west"} {
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
		if !slices.Equal(got.HeldIn, want) || len(got.Clusters) != 2 {
			return fmt.Errorf("held in %v (%+v); the API servers say %v", got.HeldIn, got.Clusters, want)
		}
		return nil
	})
	t.Logf("%s is held in %v", ip, want)
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
