package auth

import (
	"context"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func roleBinding(ns, name, kind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName}}
}

func subject(kind, name string) rbacv1.Subject {
	s := rbacv1.Subject{Kind: kind, Name: name}
	if kind != rbacv1.ServiceAccountKind {
		s.APIGroup = rbacv1.GroupName
	}
	return s
}

var listPods = rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}

// startRBAC runs an RBACNamespaces over a fake API server holding objs,
// and waits until it has read them.
func startRBAC(t *testing.T, objs ...runtime.Object) (*RBACNamespaces, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	r := NewRBACNamespaces(cs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for !r.Ready() {
		time.Sleep(5 * time.Millisecond)
	}
	return r, cs
}

// The namespaces RBAC grants a question in, as the API server's RBAC
// authorizer decides: who a binding binds (a user, a group of the user,
// a service account by its user name), what its role grants (a Role, a
// ClusterRole bound in a namespace, wildcards), and not a rule that names
// objects, which grants no list or watch of a collection.
func TestRBACNamespacesFindsWhatBindingsGrant(t *testing.T) {
	carol := &User{Name: "carol", Groups: []string{"devs", "system:authenticated"}}
	robot := &User{Name: "system:serviceaccount:ci:robot", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci"}}
	r, _ := startRBAC(t,
		clusterRole("pod-viewer", listPods),
		clusterRole("everything", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}),
		clusterRole("deployments", rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}}),
		role("by-user", "reader", listPods), roleBinding("by-user", "b", "Role", "reader", subject(rbacv1.UserKind, "carol")),
		roleBinding("by-group", "b", "ClusterRole", "pod-viewer", subject(rbacv1.GroupKind, "devs")),
		roleBinding("by-star", "b", "ClusterRole", "everything", subject(rbacv1.UserKind, "carol")),
		roleBinding("other-resource", "b", "ClusterRole", "deployments", subject(rbacv1.UserKind, "carol")),
		role("by-name", "named", rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"p-0"}}),
		roleBinding("by-name", "b", "Role", "named", subject(rbacv1.UserKind, "carol")),
		role("get-only", "getter", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}),
		roleBinding("get-only", "b", "Role", "getter", subject(rbacv1.UserKind, "carol")),
		roleBinding("missing-role", "b", "Role", "absent", subject(rbacv1.UserKind, "carol")),
		roleBinding("someone-else", "b", "ClusterRole", "pod-viewer", subject(rbacv1.UserKind, "dave")),
		roleBinding("robot-here", "b", "ClusterRole", "pod-viewer", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot", Namespace: "ci"}),
		roleBinding("ci", "b", "ClusterRole", "pod-viewer", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot"}), // its own namespace
		roleBinding("other-robot", "b", "ClusterRole", "pod-viewer", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "robot", Namespace: "elsewhere"}),
	)
	for _, c := range []struct {
		user                  *User
		verb, group, resource string
		want                  []string
	}{
		{carol, "list", "", "pods", []string{"by-group", "by-star", "by-user"}},
		{carol, "watch", "", "pods", []string{"by-group", "by-star", "by-user"}},
		{carol, "get", "", "pods", []string{"by-group", "by-star", "by-user", "get-only"}},
		{carol, "list", "apps", "deployments", []string{"by-star", "other-resource"}},
		{carol, "list", "", "secrets", []string{"by-star"}},
		{robot, "list", "", "pods", []string{"ci", "robot-here"}},
		{&User{Name: "eve"}, "list", "", "pods", nil},
	} {
		got, all := r.Namespaces(c.user, c.verb, c.group, c.resource)
		if all || !slices.Equal(got, c.want) {
			t.Errorf("%s may %s %s.%s in %v (all %v); expect %v", c.user.Name, c.verb, c.resource, c.group, got, all, c.want)
		}
	}
}

// A ClusterRoleBinding that grants the question grants it everywhere: no
// narrowing.
func TestRBACNamespacesClusterRoleBindingMeansEverywhere(t *testing.T) {
	r, _ := startRBAC(t, clusterRole("pod-viewer", listPods),
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Subjects: []rbacv1.Subject{subject(rbacv1.GroupKind, "ops")},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-viewer"}})
	if _, all := r.Namespaces(&User{Name: "olga", Groups: []string{"ops"}}, "list", "", "pods"); !all {
		t.Error("a ClusterRoleBinding grants olga list on pods, yet the namespaces are narrowed")
	}
	if got, all := r.Namespaces(&User{Name: "eve"}, "list", "", "pods"); all || len(got) != 0 {
		t.Errorf("eve, bound nowhere: %v, all %v; expect no namespace", got, all)
	}
}

// An answer is remembered until an RBAC object changes: a new binding, or
// a changed role, is seen by the next question.
func TestRBACNamespacesFollowsChanges(t *testing.T) {
	carol := &User{Name: "carol"}
	r, cs := startRBAC(t, clusterRole("pod-viewer", listPods),
		roleBinding("a", "b", "ClusterRole", "pod-viewer", subject(rbacv1.UserKind, "carol")))
	if got, _ := r.Namespaces(carol, "list", "", "pods"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("carol: %v; expect [a]", got)
	}
	ctx := context.Background()
	if _, err := cs.RbacV1().RoleBindings("b").Create(ctx, roleBinding("b", "b", "ClusterRole", "pod-viewer", subject(rbacv1.UserKind, "carol")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new RoleBinding is seen", func() bool {
		got, _ := r.Namespaces(carol, "list", "", "pods")
		return slices.Equal(got, []string{"a", "b"})
	})
	if _, err := cs.RbacV1().ClusterRoles().Update(ctx, clusterRole("pod-viewer", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ClusterRole's new rules are seen", func() bool {
		got, _ := r.Namespaces(carol, "list", "", "pods")
		return len(got) == 0
	})
}

// Until every RBAC object has been read, nothing is narrowed.
func TestRBACNamespacesNotReadyNarrowsNothing(t *testing.T) {
	r := NewRBACNamespaces(fake.NewClientset())
	if _, all := r.Namespaces(&User{Name: "carol"}, "list", "", "pods"); !all {
		t.Error("before RBAC objects are read, the namespaces are narrowed")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
