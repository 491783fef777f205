package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// The worst case of reviews per list: many namespaces, every one holding pods,
// and a service account bound in a few. kubeindex (--authz=rbac) answers
// its list across namespaces with exactly what the API server lets it
// list namespace by namespace, and with --namespace-access=rbac asks
// about the namespaces RBAC grants it in, not about every one; the same
// list with --namespace-access=review is run beside it for the figures.
func TestRestrictedListAcrossManyNamespacesAsksRBACGrantedOnly(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := t.Context()
	const n = 200
	nsName := func(i int) string { return fmt.Sprintf("rbacns-%03d", i) }
	create := func(what string, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s: %v", what, err)
		}
	}
	for i := range n {
		ns := nsName(i)
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		create(ns, err)
		// No controller-manager makes it; ServiceAccount admission wants it.
		_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		create(ns+"/default", err)
		_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-0"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "rbacns:1"}}}}, metav1.CreateOptions{})
		create(ns+"/p-0", err)
	}
	home := "rbacns-home"
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: home}}, metav1.CreateOptions{})
	create(home, err)
	token := func(sa string) string {
		t.Helper()
		_, err := cs.CoreV1().ServiceAccounts(home).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		create(sa, err)
		tr, err := cs.CoreV1().ServiceAccounts(home).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	reader, prom := token("reader"), token("prom")
	readerSubject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: home}
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rbacns-pods"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{})
	create("ClusterRole rbacns-pods", err)
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rbacns-metrics"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}}}, metav1.CreateOptions{})
	create("ClusterRole rbacns-metrics", err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rbacns-metrics"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prom", Namespace: home}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rbacns-metrics"}}, metav1.CreateOptions{})
	create("ClusterRoleBinding rbacns-metrics", err)
	granted := []int{3, 77, 150}
	for _, i := range granted {
		_, err := cs.RbacV1().RoleBindings(nsName(i)).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
			Subjects: []rbacv1.Subject{readerSubject},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rbacns-pods"}}, metav1.CreateOptions{})
		create("RoleBinding in "+nsName(i), err)
	}
	// A rule naming a pod grants no list: not a namespace to ask about.
	_, err = cs.RbacV1().Roles(nsName(120)).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "named"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"p-0"}}}}, metav1.CreateOptions{})
	create("Role named", err)
	_, err = cs.RbacV1().RoleBindings(nsName(120)).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "named"},
		Subjects: []rbacv1.Subject{readerSubject}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "named"}}, metav1.CreateOptions{})
	create("RoleBinding named", err)

	// What the API server itself lets the reader list, namespace by
	// namespace.
	cfg := rest.AnonymousClientConfig(c.RESTConfig())
	cfg.BearerToken, cfg.QPS = reader, -1
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range n {
		pods, err := as.CoreV1().Pods(nsName(i)).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			want = append(want, p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(want)
	if len(want) != len(granted) {
		t.Fatalf("the API server lets the reader list %v; expect the pods of %d namespaces", want, len(granted))
	}

	reviews := map[string]int{}
	for _, mode := range []string{"rbac", "review"} {
		k := startKubeindex(t, "--kubeconfig", c.Kubeconfig, "--resources", "pods,namespaces",
			"--auth=tokenreview", "--authz=rbac", "--namespace-access="+mode)
		before := authorizationMisses(t, k, prom)
		start := time.Now()
		got := restrictedList(t, k, reader)
		took := time.Since(start)
		after := authorizationMisses(t, k, prom)
		if !slices.Equal(got, want) {
			t.Errorf("--namespace-access=%s: kubeindex lists for the reader %v; the API server %v", mode, got, want)
		}
		reviews[mode] = after - before
		t.Logf("--namespace-access=%s: the reader's list across %d namespaces holding pods, bound in %d: %d access reviews, %s",
			mode, n, len(granted), reviews[mode], took.Round(time.Millisecond))
		k.stop(t)
	}
	// One cluster-wide question, then one per namespace RBAC grants in;
	// a scrape of /metrics may cost one more.
	if reviews["rbac"] > 1+len(granted)+1 {
		t.Errorf("--namespace-access=rbac: %d access reviews; expect at most %d", reviews["rbac"], 1+len(granted)+1)
	}
	if reviews["review"] < n {
		t.Errorf("--namespace-access=review: %d access reviews; expect one per namespace holding pods (%d)", reviews["review"], n)
	}
}

// restrictedList is kubeindex's list of pods across namespaces for the
// holder of token, as namespace/name, sorted.
func restrictedList(t *testing.T, k *kubeindex, token string) []string {
	t.Helper()
	body := authGet(t, k, "/api/v1/pods", token)
	var list struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range list.Items {
		out = append(out, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	slices.Sort(out)
	return out
}

var authorizationMissLine = regexp.MustCompile(`(?m)^kubeindex_auth_cache_total\{result="miss",stage="authorization"\} (\d+)`)

// authorizationMisses reads kubeindex's count of access reviews made (the
// answers its cache did not have).
func authorizationMisses(t *testing.T, k *kubeindex, token string) int {
	t.Helper()
	m := authorizationMissLine.FindSubmatch(authGet(t, k, "/metrics", token))
	if m == nil {
		t.Fatal("no kubeindex_auth_cache_total{stage=\"authorization\",result=\"miss\"} in /metrics")
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

func authGet(t *testing.T, k *kubeindex, path, token string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, k.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, b, err)
	}
	return b
}
