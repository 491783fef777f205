package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/auth/authtest"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// rbacEnv is startAuth with RBAC objects to narrow the namespaces asked
// about (--namespace-access=rbac): 2,000 namespaces, each holding a pod.
type rbacEnv struct {
	*authEnv
	rbac *fake.Clientset
}

func rbacTenant(i int) string { return fmt.Sprintf("tenant-%04d", i) }

func startRBACAuth(t *testing.T, objs ...runtime.Object) *rbacEnv {
	t.Helper()
	cs := fake.NewClientset(objs...)
	finder := auth.NewRBACNamespaces(cs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); finder.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e := startAuth(t, Options{Auth: AuthOptions{Namespaces: finder}})
	for i := range 2000 {
		if err := e.ss.f.Sim.Apply("pods", teamPod(rbacTenant(i), "p-0", fmt.Sprintf("10.78.%d.%d", i/250, i%250+1))); err != nil {
			t.Fatal(err)
		}
	}
	cachetest.Eventually(t, "2,000 namespaces hold pods, and RBAC objects are read", func() bool {
		ns, _ := e.ss.f.Cache.NamespacesOf("pods")
		return len(ns) >= 2000 && finder.Ready()
	})
	users := map[string]auth.User{}
	for k, v := range authUsers {
		users[k] = v
	}
	users["carol-token"] = auth.User{Name: "carol", UID: "c", Groups: []string{"devs", "system:authenticated"}}
	users["robot-token"] = auth.User{Name: "system:serviceaccount:ci:robot", UID: "r", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci"}}
	e.api.SetTokens(users)
	return &rbacEnv{authEnv: e, rbac: cs}
}

func rb(ns, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b-" + role}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}}
}

var (
	podRule  = rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	podsView = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pods-view"}, Rules: []rbacv1.PolicyRule{podRule}}
	allRole  = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}}
	carolUser = rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}
	devsGroup = rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "devs"}
	robotInCI = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot", Namespace: "ci"}
	listInNs  = func(who, ns string) authtest.Rule {
		return authtest.Rule{User: who, Verbs: []string{"list", "watch"}, Resource: "pods", Namespace: ns}
	}
	carolRBAC = []runtime.Object{podsView, allRole,
		// A Role bound to her name, a ClusterRole bound in one namespace to
		// a group of hers, a wildcard ClusterRole: three namespaces.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: rbacTenant(10), Name: "reader"}, Rules: []rbacv1.PolicyRule{podRule}},
		rb(rbacTenant(10), "Role", "reader", carolUser),
		rb(rbacTenant(20), "ClusterRole", "pods-view", devsGroup),
		rb(rbacTenant(30), "ClusterRole", "all", carolUser),
		// A rule naming pods grants no list of them.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: rbacTenant(40), Name: "named"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"p-0"}}}},
		rb(rbacTenant(40), "Role", "named", carolUser),
		// RBAC grants, the API server (a webhook) denies.
		rb(rbacTenant(50), "ClusterRole", "pods-view", carolUser),
	}
	// What the API server answers: RBAC, less tenant-0050, which a
	// webhook denies.
	carolAllowed = []authtest.Rule{listInNs("carol", rbacTenant(10)), listInNs("carol", rbacTenant(20)), listInNs("carol", rbacTenant(30))}
)

func podsIn(namespaces ...string) []string {
	var out []string
	for _, ns := range namespaces {
		out = append(out, ns+"/p-0")
	}
	return out
}

// The worst case of reviews per list: 2,000 namespaces, every one holding
// pods. Asking about each would take 2,001 reviews (20s at the review
// client's 100 a second). With RBAC objects a restricted caller's list
// across namespaces asks about the namespaces where a RoleBinding grants
// it only, and the
// API server still decides each: a webhook's deny excludes one.
func TestRestrictedListAsksOnlyRBACGrantedNamespaces(t *testing.T) {
	e := startRBACAuth(t, carolRBAC...)
	e.api.SetRules(append(authRules(), carolAllowed...)...)
	want := podsIn(rbacTenant(10), rbacTenant(20), rbacTenant(30))
	_, before := e.api.Reviews()
	resp, body := e.get(t, "/api/v1/pods", "carol-token")
	if resp.StatusCode != 200 || !slices.Equal(itemKeys(body), want) {
		t.Fatalf("carol's list: %d %v; expect 200 %v", resp.StatusCode, itemKeys(body), want)
	}
	_, after := e.api.Reviews()
	// One cluster-wide question, then tenants 10, 20, 30 and 50 (granted by
	// RBAC, denied by the API server).
	if n := after - before; n > 5 {
		t.Errorf("carol's list across 2,000 namespaces cost %d access reviews; expect at most 5 (cluster-wide, then the 4 namespaces RBAC grants in)", n)
	}
	t.Logf("a restricted list across 2,000 namespaces: %d access reviews", after-before)

	// A namespace asked about by name is decided by the API server alone.
	resp, body = e.get(t, "/api/v1/pods?namespace="+rbacTenant(50), "carol-token")
	if resp.StatusCode != 403 {
		t.Errorf("carol's list in %s, which the API server denies: %d %s; expect 403", rbacTenant(50), resp.StatusCode, body)
	}
}

// A service account is bound by its own subject kind.
func TestRestrictedListFindsServiceAccountBindings(t *testing.T) {
	e := startRBACAuth(t, podsView,
		rb(rbacTenant(7), "ClusterRole", "pods-view", robotInCI),
		rb(rbacTenant(8), "ClusterRole", "pods-view", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot", Namespace: "elsewhere"}))
	robot := "system:serviceaccount:ci:robot"
	e.api.SetRules(append(authRules(), listInNs(robot, rbacTenant(7)), listInNs(robot, rbacTenant(8)))...)
	_, before := e.api.Reviews()
	resp, body := e.get(t, "/api/v1/pods", "robot-token")
	_, after := e.api.Reviews()
	// tenant-0008's binding is of another robot: not asked about, though
	// this fake API server would allow it.
	if want := podsIn(rbacTenant(7)); resp.StatusCode != 200 || !slices.Equal(itemKeys(body), want) {
		t.Fatalf("robot's list: %d %v; expect 200 %v", resp.StatusCode, itemKeys(body), want)
	}
	if n := after - before; n > 2 {
		t.Errorf("robot's list cost %d access reviews; expect at most 2", n)
	}
}

// A new RoleBinding is seen by the next list; until then, the answers
// (RBAC's and the API server's) are remembered.
func TestRestrictedListFollowsRBACChanges(t *testing.T) {
	e := startRBACAuth(t, carolRBAC...)
	e.api.SetRules(append(authRules(), append(carolAllowed, listInNs("carol", rbacTenant(60)))...)...)
	if _, body := e.get(t, "/api/v1/pods", "carol-token"); len(itemKeys(body)) != 3 {
		t.Fatalf("carol's first list: %v; expect 3 pods", itemKeys(body))
	}
	_, before := e.api.Reviews()
	if _, body := e.get(t, "/api/v1/pods", "carol-token"); len(itemKeys(body)) != 3 {
		t.Fatalf("carol's second list: %v; expect 3 pods", itemKeys(body))
	}
	if _, after := e.api.Reviews(); after != before {
		t.Errorf("a repeated list cost %d access reviews; expect none (remembered)", after-before)
	}
	if _, err := e.rbac.RbacV1().RoleBindings(rbacTenant(60)).Create(context.Background(),
		rb(rbacTenant(60), "ClusterRole", "pods-view", carolUser), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := podsIn(rbacTenant(10), rbacTenant(20), rbacTenant(30), rbacTenant(60))
	cachetest.Eventually(t, "carol's list holds tenant-0060's pod", func() bool {
		_, body := e.get(t, "/api/v1/pods", "carol-token")
		return slices.Equal(itemKeys(body), want)
	})
}

// A caller RBAC grants nothing to is refused without a review per
// namespace.
func TestRestrictedListBoundNowhereIsRefusedCheaply(t *testing.T) {
	e := startRBACAuth(t, carolRBAC...)
	_, before := e.api.Reviews()
	if resp, _ := e.get(t, "/api/v1/pods", "nobody-token"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("nobody's list: %d; expect 403", resp.StatusCode)
	}
	if _, after := e.api.Reviews(); after-before > 1 {
		t.Errorf("nobody's list cost %d access reviews; expect 1 (cluster-wide)", after-before)
	}
}

// The 429 of a user over its share of reviews says when to retry.
func TestTooManyAccessReviewsSaysWhenToRetry(t *testing.T) {
	if st := errorStatus(errTooManyAccessReviews); st.Code != 429 || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Errorf("kubeindex API: %+v; expect 429 with retryAfterSeconds 1", st)
	}
	if st := kubeStatus(errTooManyAccessReviews); st.Code != 429 || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Errorf("Kubernetes API: %+v; expect 429 with retryAfterSeconds 1", st)
	}
}

// The address stream asks about namespaces as lists do: a restricted
// caller across 2,000 namespaces costs the reviews of the namespaces RBAC
// grants it, for pods and for Services, not one per namespace known; a
// caller RBAC grants nothing is refused as cheaply, and a bad ?node= is a
// 400 before any review. The multiplexed socket's subscription is the same.
func TestAddressStreamAsksOnlyRBACGrantedNamespaces(t *testing.T) {
	e := startRBACAuth(t, carolRBAC...)
	e.api.SetRules(append(authRules(), carolAllowed...)...)
	bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	reviews := func() int64 { _, n := e.api.Reviews(); return n }

	before := reviews()
	carol := addrSSE(t, e.ss.url+"/api/v1/ip:watch", bearer("carol-token"))
	carol.until("SYNCED", func() bool { return carol.synced })
	// Pods: cluster-wide, then tenants 10, 20, 30 and 50; Services:
	// cluster-wide, then tenant 30 (the wildcard role); nodes: cluster-wide.
	if n := reviews() - before; n > 8 {
		t.Errorf("carol's address stream across 2,000 namespaces cost %d access reviews; expect at most 8", n)
	}
	for ip, owners := range carol.owners {
		if !strings.HasPrefix(owners, "Pod tenant-0010/") && !strings.HasPrefix(owners, "Pod tenant-0020/") && !strings.HasPrefix(owners, "Pod tenant-0030/") {
			t.Errorf("carol sees %s held by %q", ip, owners)
		}
	}
	if len(carol.owners) != 3 {
		t.Errorf("carol sees %d addresses; expect the 3 pods of her namespaces", len(carol.owners))
	}

	before = reviews()
	m, resp := openMuxWith(t, e.ss.wsURL("/api/v1/stream"), bearer("carol-token"))
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("carol's socket: %d", resp.StatusCode)
	}
	m.send(t, `{"op":"subscribe","id":"ip","resource":"ip:watch"}`)
	for got := m.expectOther(t); got.Get("type").Str != "SYNCED"; got = m.expectOther(t) {
		if got.Get("type").Str == "ERROR" {
			t.Fatalf("carol's ip:watch subscription: %s", got.Raw)
		}
	}
	if n := reviews() - before; n > 8 {
		t.Errorf("carol's ip:watch subscription cost %d access reviews; expect at most 8 (cached: fewer)", n)
	}

	before = reviews()
	if sse := openSSE(t, e.ss.url+"/api/v1/ip:watch", bearer("nobody-token")); sse.resp.StatusCode != http.StatusForbidden {
		t.Errorf("nobody's address stream: %d; expect 403", sse.resp.StatusCode)
	}
	if n := reviews() - before; n > 3 {
		t.Errorf("nobody's refusal cost %d access reviews; expect at most 3 (one per kind, cluster-wide)", n)
	}

	before = reviews()
	if sse := openSSE(t, e.ss.url+"/api/v1/ip:watch?node=Not_A_Node", bearer("robot-token")); sse.resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad node: %d; expect 400", sse.resp.StatusCode)
	}
	if n := reviews() - before; n != 0 {
		t.Errorf("a bad node cost %d access reviews before its 400; expect none", n)
	}
}
