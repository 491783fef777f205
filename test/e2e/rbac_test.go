package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// readVerbs are the only verbs kubeindex's role may grant.
var readVerbs = []string{"get", "list", "watch"}

// writeVerbs must all be denied on every resource the role names.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate"}

// delegatedAuth is the one permitted exception to read-only: kubeindex's
// optional authentication and authorization ask the API server, through
// TokenReview and SubjectAccessReview, who a caller is and what the caller
// may read. deploy/ may grant that by binding the built-in
// system:auth-delegator ClusterRole (or with the same rules in its own
// role): "create" on exactly these two resources, which write nothing.
var delegatedAuth = []schema.GroupResource{
	{Group: "authentication.k8s.io", Resource: "tokenreviews"},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
}

// everyoneMay is what the API server's default RBAC grants every
// authenticated user (system:basic-user and the like): asking about
// oneself.
var everyoneMay = []schema.GroupResource{
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
}

// openAPIURLs are the API server's OpenAPI documents, which /k8s/openapi
// serves trimmed to the cached resources: the only non-resource URLs a
// role may grant, and only get.
var openAPIURLs = []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/*"}

// checkRolesAsWritten reads deploy/'s RBAC objects: the roles grant read
// verbs only (or delegatedAuth), name no wildcard and no secrets, and read
// exactly what config.yaml caches; bindings bind only kubeindex's service
// account, to those roles or to system:auth-delegator.
func checkRolesAsWritten(t *testing.T, objs []*unstructured.Unstructured, mapper meta.RESTMapper, cfg kubeindexConfig, ns, sa string) {
	t.Helper()
	cached := resolve(t, mapper, cfg.resources)
	readable := map[schema.GroupResource]bool{}
	own := map[string]bool{}
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, o := range ofKind(objs, kind) {
			own[kind+"/"+o.GetName()] = true
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				t.Fatal(err)
			}
			if role.AggregationRule != nil {
				t.Errorf("%s aggregates other roles: what it grants is not in deploy/", describe(o))
			}
			for _, rule := range role.Rules {
				checkRule(t, describe(o), rule, readable)
			}
		}
	}
	for _, gr := range cached {
		if !readable[gr] {
			t.Errorf("config.yaml caches %v, but no role in deploy/ grants get, list and watch on it", gr)
		}
		delete(readable, gr)
	}
	for gr := range readable {
		t.Errorf("a role in deploy/ grants reading %v, which config.yaml does not cache: not minimal", gr)
	}

	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, o := range ofKind(objs, kind) {
			var b rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatal(err)
			}
			ref := b.RoleRef.Kind + "/" + b.RoleRef.Name
			if !own[ref] && ref != "ClusterRole/system:auth-delegator" {
				t.Errorf("%s binds %s, which is neither a role of deploy/ nor system:auth-delegator", describe(o), ref)
			}
			for _, s := range b.Subjects {
				if s.Kind != rbacv1.ServiceAccountKind || s.Name != sa || s.Namespace != ns {
					t.Errorf("%s binds %s %s/%s, want only ServiceAccount %s/%s", describe(o), s.Kind, s.Namespace, s.Name, ns, sa)
				}
			}
		}
	}
}

// checkRule fails the test for anything in rule beyond reading named
// resources (or delegatedAuth), and records in readable what it lets
// kubeindex get, list and watch.
func checkRule(t *testing.T, role string, rule rbacv1.PolicyRule, readable map[schema.GroupResource]bool) {
	t.Helper()
	if len(rule.NonResourceURLs) > 0 && (!slices.Equal(rule.Verbs, []string{"get"}) ||
		slices.ContainsFunc(rule.NonResourceURLs, func(u string) bool { return !slices.Contains(openAPIURLs, u) })) {
		t.Errorf("%s grants %v on non-resource URLs %v: only get on %v", role, rule.Verbs, rule.NonResourceURLs, openAPIURLs)
	}
	for _, field := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
		if slices.Contains(field, "*") {
			t.Errorf("%s has a wildcard: %+v", role, rule)
		}
	}
	for _, g := range rule.APIGroups {
		for _, r := range rule.Resources {
			gr := schema.GroupResource{Group: g, Resource: r}
			if r == "secrets" && g == "" {
				t.Errorf("%s names secrets", role)
			}
			for _, v := range rule.Verbs {
				if !slices.Contains(readVerbs, v) && !(v == "create" && slices.Contains(delegatedAuth, gr)) {
					t.Errorf("%s grants %q on %v: kubeindex only reads", role, v, gr)
				}
			}
			if !slices.Contains(delegatedAuth, gr) && len(rule.ResourceNames) == 0 &&
				slices.Contains(rule.Verbs, "get") && slices.Contains(rule.Verbs, "list") && slices.Contains(rule.Verbs, "watch") {
				readable[gr] = true
			}
		}
	}
}

// checkAuthorizer asks the API server's authorizer (SubjectAccessReview, as
// admin) what the service account may do, cluster-wide and in its own
// namespace: read each configured resource, and nothing else on anything
// the roles name; never read secrets.
func checkAuthorizer(t *testing.T, ctx context.Context, cs kubernetes.Interface, mapper meta.RESTMapper, roles []*unstructured.Unstructured, cfg kubeindexConfig, ns, sa string) {
	t.Helper()
	user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	allowed := func(verb string, gr schema.GroupResource, namespace string) bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: verb, Group: gr.Group, Resource: gr.Resource, Namespace: namespace,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview %s %v: %v", verb, gr, err)
		}
		return sar.Status.Allowed
	}

	named := map[schema.GroupResource]bool{}
	for _, o := range roles {
		var role rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					named[schema.GroupResource{Group: g, Resource: r}] = true
				}
			}
		}
	}
	for _, gr := range delegatedAuth {
		named[gr] = true // whether deploy/ grants them or not: nothing but create
	}
	checked := 0
	for _, namespace := range []string{"", ns} {
		for gr := range named {
			for _, verb := range writeVerbs {
				if verb == "create" && slices.Contains(delegatedAuth, gr) {
					continue // the permitted exception
				}
				checked++
				if allowed(verb, gr, namespace) {
					t.Errorf("%s may %s %v (namespace %q): the role must grant only get, list and watch", user, verb, gr, namespace)
				}
			}
		}
		for _, verb := range readVerbs {
			if allowed(verb, schema.GroupResource{Resource: "secrets"}, namespace) {
				t.Errorf("%s may %s secrets (namespace %q)", user, verb, namespace)
			}
			for _, gr := range resolve(t, mapper, cfg.resources) {
				if !allowed(verb, gr, namespace) {
					t.Errorf("%s may not %s %v (namespace %q), which kubeindex caches", user, verb, gr, namespace)
				}
			}
		}
	}
	t.Logf("SubjectAccessReview: %d write checks on %d resources denied; reads allowed", checked, len(named))
}

// checkSelfRules asks, as the service account (SelfSubjectRulesReview),
// for every rule that applies to it in its namespace: whatever binding
// grants it, no verb beyond reading, except what every user may do and
// delegatedAuth.
func checkSelfRules(t *testing.T, ctx context.Context, kubeconfig, ns string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectRulesReview as the service account: %v", err)
	}
	if rr.Status.Incomplete {
		t.Logf("SelfSubjectRulesReview is incomplete: %s", rr.Status.EvaluationError)
	}
	for _, rule := range rr.Status.ResourceRules {
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				gr := schema.GroupResource{Group: g, Resource: r}
				for _, v := range rule.Verbs {
					exempt := v == "create" && (slices.Contains(everyoneMay, gr) || slices.Contains(delegatedAuth, gr))
					if !exempt && (!slices.Contains(readVerbs, v) || g == "*" || r == "*" || (g == "" && r == "secrets")) {
						t.Errorf("the service account may %s %v in %s: %+v", v, gr, ns, rule)
					}
				}
			}
		}
	}
}
