package e2e

import (
	"context"
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// canI runs `kubectl auth can-i args...` and returns its answer line and
// whether it said yes. kubectl exits 1 for "no"; anything else is an error.
func (k *kubectlCmd) canI(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	out, _, err := k.run(append([]string{"auth", "can-i"}, args...)...)
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatal(err)
	}
	out = strings.TrimSpace(out)
	return out, err == nil && out == "yes"
}

// TestKubeAuthReviewsWithoutAuth: with --auth=none, kubectl auth can-i and
// whoami answer through /k8s: every read of a cached resource yes, every
// write no with the read-only reason, the caller anonymous.
func TestKubeAuthReviewsWithoutAuth(t *testing.T) {
	c := cluster.StartForTest(t)
	k := startKubeAPIKubeindex(t, c.Kubeconfig)
	ki := newKubectl(t, "kubeindex", kubeconfigFor(t, k.URL+k8sPrefix))

	for _, args := range [][]string{
		{"list", "pods"}, {"watch", "pods", "-A"}, {"get", "deployments.apps", "-n", "kube-system"},
		{"get", "pods", "--subresource=status", "-n", "default"}, {"list", cluster.WidgetGVR.Resource},
	} {
		if out, yes := ki.canI(t, args...); !yes {
			t.Errorf("kubectl auth can-i %s: %q, want yes", strings.Join(args, " "), out)
		}
	}
	for _, tc := range []struct {
		args   []string
		reason string
	}{
		{[]string{"create", "pods"}, "kubeindex is a read-only cache of the cluster"},
		{[]string{"delete", "nodes"}, "kubeindex is a read-only cache of the cluster"},
		{[]string{"list", "secrets"}, "kubeindex does not serve secrets"},
		{[]string{"get", "pods", "--subresource=log"}, "does not serve get of the subresource pods/log"},
	} {
		out, yes := ki.canI(t, tc.args...)
		if yes || !strings.HasPrefix(out, "no - ") || !strings.Contains(out, tc.reason) {
			t.Errorf("kubectl auth can-i %s: %q, want no - …%s…", strings.Join(tc.args, " "), out, tc.reason)
		}
	}
	out, _, err := ki.run("auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}")
	if err != nil {
		t.Fatal(err)
	}
	if out != `system:anonymous ["system:unauthenticated"]` {
		t.Errorf("kubectl auth whoami: %q, want the anonymous user", out)
	}
	out, _, err = ki.run("auth", "can-i", "--list", "-n", "default")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "pods ") || !strings.Contains(out, "[get list watch]") || !strings.Contains(out, "selfsubjectaccessreviews.authorization.k8s.io") {
		t.Errorf("kubectl auth can-i --list: the cached resources' reads and the reviews expected:\n%s", out)
	}
}

// TestKubeAuthReviewsAsRBACDecides: with --auth=tokenreview --authz=rbac, a
// service account asks kubeindex and the API server the questions kubectl
// auth can-i and whoami ask (through client-go, as kubectl does: kubectl
// sends no token to a plain-HTTP server): the same identity, the same
// answers to every read, and to a write the API server allows, kubeindex's
// read-only denial.
func TestKubeAuthReviewsAsRBACDecides(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := context.Background()
	const home, other = "review-home", "review-other"
	for _, ns := range []string{home, other} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	_, err := cs.CoreV1().ServiceAccounts(home).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "asker"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = cs.RbacV1().Roles(home).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "asker"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch", "create"}, APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}}}},
		metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = cs.RbacV1().RoleBindings(home).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "asker"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "asker", Namespace: home}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "asker"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(home).CreateToken(ctx, "asker", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := startKubeAPIKubeindex(t, c.Kubeconfig, "--auth=tokenreview", "--authz=rbac")
	apiCfg := rest.AnonymousClientConfig(c.RESTConfig())
	apiCfg.BearerToken = tr.Status.Token
	api, err := kubernetes.NewForConfig(apiCfg)
	if err != nil {
		t.Fatal(err)
	}
	ki, err := kubernetes.NewForConfig(&rest.Config{Host: k.URL + k8sPrefix, BearerToken: tr.Status.Token})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(cs kubernetes.Interface, ra authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
		t.Helper()
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%+v: %v", ra, err)
		}
		return r.Status
	}
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Verb: "list", Resource: "pods", Namespace: home}, {Verb: "watch", Resource: "pods", Namespace: home},
		{Verb: "get", Resource: "pods", Namespace: home, Name: "x"}, {Verb: "get", Resource: "pods", Subresource: "status", Namespace: home, Name: "x"},
		{Verb: "list", Resource: "pods", Namespace: other}, {Verb: "list", Resource: "pods"},
		{Verb: "list", Group: "apps", Resource: "deployments", Namespace: home},
	} {
		if a, b := ask(api, ra), ask(ki, ra); a.Allowed != b.Allowed {
			t.Errorf("%+v: the API server %+v, kubeindex %+v", ra, a, b)
		}
	}
	write := authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: home}
	if st := ask(api, write); !st.Allowed {
		t.Fatalf("the API server does not let the service account create pods: %+v", st)
	}
	if st := ask(ki, write); st.Allowed || !st.Denied || !strings.Contains(st.Reason, "kubeindex is a read-only cache") {
		t.Errorf("kubeindex: create pods: %+v, want denied with the read-only reason", st)
	}
	who := func(cs kubernetes.Interface) authenticationv1.UserInfo {
		t.Helper()
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.UserInfo
	}
	if a, b := who(api), who(ki); !reflect.DeepEqual(a, b) || a.Username != "system:serviceaccount:"+home+":asker" {
		t.Errorf("whoami: the API server %+v, kubeindex %+v", a, b)
	}
}

// TestKubectlSubresources: kubectl reads status and scale through /k8s as
// through the API server, and a subresource kubeindex does not serve
// (kubectl logs, exec, drain's eviction) ends in a message that names it,
// not in "not found".
func TestKubectlSubresources(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	k := startKubeAPIKubeindex(t, c.Kubeconfig)
	p := kubectlPair{
		api: newKubectl(t, "API server", c.Kubeconfig),
		ki:  newKubectl(t, "kubeindex", kubeconfigFor(t, k.URL+k8sPrefix)),
	}
	pod, dep, node := seeded.Pods[0], seeded.Deployments[0], seeded.Nodes[0].Name
	widget := seeded.Widgets[0]
	for _, tc := range []struct {
		name string
		args []string
		norm func(string) string
	}{
		{"pod status", []string{"get", "pod", "-n", pod.Namespace, pod.Name, "--subresource=status"}, tableCells},
		{"pod status as JSON", []string{"get", "pod", "-n", pod.Namespace, pod.Name, "--subresource=status", "-o", "json"}, asIs},
		{"node status", []string{"get", "node", node, "--subresource=status", "-o", "yaml"}, asIs},
		{"deployment scale", []string{"get", "deployment", "-n", dep.Namespace, dep.Name, "--subresource=scale"}, tableCells},
		{"deployment scale as JSON", []string{"get", "deployment", "-n", dep.Namespace, dep.Name, "--subresource=scale", "-o", "json"}, asIs},
		{"widget status", []string{"get", cluster.WidgetGVR.Resource, "-n", widget.GetNamespace(), widget.GetName(), "--subresource=status", "-o", "json"}, asIs},
	} {
		t.Run(tc.name, func(t *testing.T) { p.same(t, tc.norm, tc.args...) })
	}
	_, stderr, err := p.ki.run("logs", "-n", pod.Namespace, pod.Name)
	if err == nil || !strings.Contains(stderr, `does not serve the subresource "log"`) || strings.Contains(stderr, "not found") {
		t.Errorf("kubectl logs against kubeindex: %v\n%s\nwant a message naming the log subresource", err, stderr)
	}
	_, stderr, err = p.ki.run("get", "--raw", "/api/v1/namespaces/"+pod.Namespace+"/pods/"+pod.Name+"/exec?command=sh")
	if err == nil || !strings.Contains(stderr, `does not serve the subresource "exec"`) {
		t.Errorf("GET …/exec against kubeindex: %v\n%s", err, stderr)
	}
}
