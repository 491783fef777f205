package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

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
		{"get", "pods/status", "-n", "default"}, {"list", cluster.WidgetGVR.Resource},
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
		{[]string{"get", "pods/log"}, "does not serve get of the subresource pods/log"},
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
// service account asks kubectl auth can-i and whoami of kubeindex and of
// the API server: the same identity, the same answers to every read, and
// to writes the API server allows, kubeindex's read-only no.
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
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch", "create"}, APIGroups: []string{""}, Resources: []string{"pods"}}}},
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
	token := tr.Status.Token

	k := startKubeAPIKubeindex(t, c.Kubeconfig, "--auth=tokenreview", "--authz=rbac")
	p := kubectlPair{
		api: newKubectl(t, "API server", tokenKubeconfig(t, c, token)),
		ki:  newKubectl(t, "kubeindex", kubeindexTokenKubeconfig(t, k.URL+k8sPrefix, token)),
	}
	for _, args := range [][]string{
		{"list", "pods", "-n", home}, {"watch", "pods", "-n", home}, {"get", "pods", "-n", home},
		{"list", "pods", "-n", other}, {"list", "pods", "-A"}, {"list", "deployments.apps", "-n", home},
		{"get", "pods/status", "-n", home},
	} {
		apiOut, apiYes := p.api.canI(t, args...)
		kiOut, kiYes := p.ki.canI(t, args...)
		if apiYes != kiYes {
			t.Errorf("kubectl auth can-i %s: the API server %q, kubeindex %q", strings.Join(args, " "), apiOut, kiOut)
		}
	}
	if out, yes := p.api.canI(t, "create", "pods", "-n", home); !yes {
		t.Fatalf("the API server lets the service account create pods: %q", out)
	}
	if out, yes := p.ki.canI(t, "create", "pods", "-n", home); yes || !strings.Contains(out, "kubeindex is a read-only cache") {
		t.Errorf("kubeindex: kubectl auth can-i create pods: %q, want no with the read-only reason", out)
	}
	p.same(t, asIs, "auth", "whoami")
}

// kubeindexTokenKubeconfig writes a kubeconfig whose only cluster is
// server (plain HTTP), with a bearer token.
func kubeindexTokenKubeconfig(t *testing.T, server, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeindex"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["asker"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubeindex"] = &clientcmdapi.Context{Cluster: "kubeindex", AuthInfo: "asker"}
	cfg.CurrentContext = "kubeindex"
	path := filepath.Join(t.TempDir(), "kubeconfig-kubeindex-token")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
