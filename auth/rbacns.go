package auth

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/auth/rbac/validation"
	"k8s.io/utils/lru"
)

// NamespaceFinder narrows the namespaces a restricted caller's question
// across namespaces must be asked about, one review each: a namespace it
// leaves out is not asked about, so the caller sees nothing there
// through a list across namespaces. Implementations are safe for
// concurrent use.
type NamespaceFinder interface {
	// Namespaces returns, sorted, the namespaces where u might be allowed
	// verb on resource of group; all is true when it cannot narrow them
	// (not ready yet, or allowed in every namespace): every namespace is
	// to be asked about.
	Namespaces(u *User, verb, group, resource string) (namespaces []string, all bool)
}

// RBACNamespaces is a NamespaceFinder that reads the cluster's RBAC
// objects, as OpenShift's project authorization cache does: a caller
// might be allowed in a namespace only where a RoleBinding binds it
// (its name, a group of it, its service account) to a Role or
// ClusterRole whose rules grant the verb on the resource. It decides
// nothing itself: every namespace it finds is still asked about (a
// SubjectAccessReview), so a webhook or any other authorizer that denies
// still decides. A namespace granted by an authorizer other than RBAC
// alone (a webhook, ABAC) is not found.
//
// Answers are remembered per user and question until any RBAC object
// changes.
type RBACNamespaces struct {
	factory             informers.SharedInformerFactory
	roles               rbaclisters.RoleLister
	roleBindings        rbaclisters.RoleBindingLister
	clusterRoles        rbaclisters.ClusterRoleLister
	clusterRoleBindings rbaclisters.ClusterRoleBindingLister
	synced              []toolscache.InformerSynced
	ready               atomic.Bool

	// generation counts RBAC changes: an answer computed at an older one
	// is computed anew.
	generation atomic.Uint64
	mu         sync.Mutex
	memo       *lru.Cache // attributesKey → grant
}

type grant struct {
	generation uint64
	namespaces []string
	all        bool
}

// memoEntries bounds the answers remembered: users × questions.
const memoEntries = 4096

// rbacResources are what RBACNamespaces watches; kubeindex's service
// account needs list and watch on them.
var rbacResources = []string{"roles", "rolebindings", "clusterroles", "clusterrolebindings"}

// NewRBACNamespaces watches RBAC objects with client; Run starts it.
func NewRBACNamespaces(client kubernetes.Interface) *RBACNamespaces {
	f := informers.NewSharedInformerFactory(client, 0)
	rbac := f.Rbac().V1()
	r := &RBACNamespaces{factory: f,
		roles: rbac.Roles().Lister(), roleBindings: rbac.RoleBindings().Lister(),
		clusterRoles: rbac.ClusterRoles().Lister(), clusterRoleBindings: rbac.ClusterRoleBindings().Lister(),
		memo: lru.New(memoEntries)}
	changed := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.generation.Add(1) },
		UpdateFunc: func(any, any) { r.generation.Add(1) },
		DeleteFunc: func(any) { r.generation.Add(1) },
	}
	for _, inf := range []toolscache.SharedIndexInformer{rbac.Roles().Informer(), rbac.RoleBindings().Informer(),
		rbac.ClusterRoles().Informer(), rbac.ClusterRoleBindings().Informer()} {
		if _, err := inf.AddEventHandler(changed); err != nil {
			panic(err) // only once the informer has stopped
		}
		r.synced = append(r.synced, inf.HasSynced)
	}
	return r
}

// NewRBACNamespacesForConfig is NewRBACNamespaces with a client of the API
// server. It first checks that it may list every RBAC resource: when it
// may not, it says so, and the caller should ask about every namespace
// instead.
func NewRBACNamespacesForConfig(ctx context.Context, cfg *rest.Config) (*RBACNamespaces, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("RBAC client: %w", err)
	}
	for _, res := range rbacResources {
		var err error
		opts := metav1.ListOptions{Limit: 1}
		switch res {
		case "roles":
			_, err = cs.RbacV1().Roles("").List(ctx, opts)
		case "rolebindings":
			_, err = cs.RbacV1().RoleBindings("").List(ctx, opts)
		case "clusterroles":
			_, err = cs.RbacV1().ClusterRoles().List(ctx, opts)
		case "clusterrolebindings":
			_, err = cs.RbacV1().ClusterRoleBindings().List(ctx, opts)
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s.rbac.authorization.k8s.io: %w", res, err)
		}
	}
	return NewRBACNamespaces(cs), nil
}

// Run watches RBAC objects until ctx ends.
func (r *RBACNamespaces) Run(ctx context.Context) {
	r.Start(ctx.Done())
	defer r.factory.Shutdown()
	r.WaitReady(ctx)
	<-ctx.Done()
}

// Start starts watching RBAC objects, until stop is closed.
func (r *RBACNamespaces) Start(stop <-chan struct{}) { r.factory.Start(stop) }

// WaitReady waits until every RBAC object has been read once, or ctx ends;
// it reports whether they have.
func (r *RBACNamespaces) WaitReady(ctx context.Context) bool {
	if toolscache.WaitForCacheSync(ctx.Done(), r.synced...) {
		r.ready.Store(true)
	}
	return r.Ready()
}

// Ready reports whether every RBAC object has been read once.
func (r *RBACNamespaces) Ready() bool { return r.ready.Load() }

// Namespaces implements NamespaceFinder. Until every RBAC object has been
// read once, all is true.
func (r *RBACNamespaces) Namespaces(u *User, verb, group, resource string) ([]string, bool) {
	if !r.Ready() {
		return nil, true
	}
	if u == nil {
		u = &User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	}
	key := attributesKey(Attributes{User: u, Verb: verb, Group: group, Resource: resource})
	gen := r.generation.Load()
	r.mu.Lock()
	v, ok := r.memo.Get(key)
	r.mu.Unlock()
	if g, _ := v.(grant); ok && g.generation == gen {
		return g.namespaces, g.all
	}
	g := grant{generation: gen}
	g.namespaces, g.all = r.compute(u, verb, group, resource)
	r.mu.Lock()
	r.memo.Add(key, g)
	r.mu.Unlock()
	return g.namespaces, g.all
}

// compute reads the RBAC objects: all when a ClusterRoleBinding grants
// the question (every namespace), else the namespaces of the RoleBindings
// that do.
func (r *RBACNamespaces) compute(u *User, verb, group, resource string) ([]string, bool) {
	// A collection (no resourceNames): a rule naming objects grants no
	// list or watch of them, as RBAC's own authorizer decides.
	asked := []rbacv1.PolicyRule{{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource}}}
	grants := func(rules []rbacv1.PolicyRule) bool {
		ok, _ := validation.Covers(rules, asked)
		return ok
	}
	crbs, _ := r.clusterRoleBindings.List(labels.Everything())
	for _, b := range crbs {
		if b.RoleRef.Kind == "ClusterRole" && appliesTo(u, b.Subjects, "") {
			if cr, err := r.clusterRoles.Get(b.RoleRef.Name); err == nil && grants(cr.Rules) {
				return nil, true
			}
		}
	}
	clusterRoleGrants := map[string]bool{} // each ClusterRole decided once
	var out []string
	rbs, _ := r.roleBindings.List(labels.Everything())
	for _, b := range rbs {
		if _, found := slices.BinarySearch(out, b.Namespace); found || !appliesTo(u, b.Subjects, b.Namespace) {
			continue
		}
		var ok bool
		switch b.RoleRef.Kind {
		case "ClusterRole":
			var known bool
			if ok, known = clusterRoleGrants[b.RoleRef.Name]; !known {
				cr, err := r.clusterRoles.Get(b.RoleRef.Name)
				ok = err == nil && grants(cr.Rules)
				clusterRoleGrants[b.RoleRef.Name] = ok
			}
		case "Role":
			role, err := r.roles.Roles(b.Namespace).Get(b.RoleRef.Name)
			ok = err == nil && grants(role.Rules)
		}
		if ok {
			i, _ := slices.BinarySearch(out, b.Namespace)
			out = slices.Insert(out, i, b.Namespace)
		}
	}
	return out, false
}

// appliesTo reports whether one of subjects is u, as RBAC's authorizer
// matches them: a User by name, a Group among u's groups, a ServiceAccount
// by its user name (system:serviceaccount:NAMESPACE:NAME; a RoleBinding's
// subject without a namespace is in the binding's).
func appliesTo(u *User, subjects []rbacv1.Subject, bindingNamespace string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if u.Name == s.Name {
				return true
			}
		case rbacv1.GroupKind:
			if slices.Contains(u.Groups, s.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = bindingNamespace
			}
			if ns != "" && u.Name == "system:serviceaccount:"+ns+":"+s.Name {
				return true
			}
		}
	}
	return false
}
