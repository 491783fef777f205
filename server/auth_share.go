package server

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
)

// Fewer reviews for the same answers. Every review is
// a call to the API server, shared by all callers and fairly divided
// among users by the authorizer (auth.AccessReviewOptions): the fewer one
// request needs, the sooner it is answered, and the less a caller who
// asks for many names or namespaces can cost.

// errTooManyAccessReviews answers a caller whose own reviews fill its
// share: it is slowed down, not refused, and nobody else is. Its answer
// says when to retry (Retry-After: 1), as a 503 does.
var errTooManyAccessReviews = echo.NewHTTPError(http.StatusTooManyRequests,
	"too many access reviews are waiting for this user; retry later (other users are not affected)")

// decideObject decides at about one named object, asking first about the
// whole namespace (or, for a cluster-scoped resource, the cluster): a
// rule that allows it there allows every name (RBAC's resourceNames rules
// match named requests only), so one review, cached, answers for every
// name, and a caller who asks for many names costs one review, not one
// per name. Only when that is refused is the name itself asked about.
func (a access) decideObject(at auth.Attributes) (bool, error) {
	if at.Name != "" {
		wide := at
		wide.Name = ""
		if ok, err := a.decide(wide); err != nil || ok {
			return ok, err
		}
	}
	return a.decide(at)
}

// allowedNamespaces are the namespaces where the caller may verb res, of
// those its answer can come from (candidateNamespaces). When none of them
// is, a list asks about the other namespaces known: allowed only where
// the resource has no object, it answers an empty list, not a 403.
func (a access) allowedNamespaces(verb string, res cache.Resource) ([]string, error) {
	candidates, err := a.candidateNamespaces(verb, res)
	if err != nil {
		return nil, err
	}
	allowed, err := a.namespacesAllowed(verb, res, candidates)
	if err != nil || len(allowed) > 0 || verb != auth.VerbList {
		return allowed, err
	}
	others := slices.DeleteFunc(a.knownNamespaces(verb, res), func(ns string) bool {
		_, found := slices.BinarySearch(candidates, ns)
		return found
	})
	return a.namespacesAllowed(verb, res, others)
}

// candidateNamespaces are the namespaces a restricted caller's answer
// can come from, each to be asked about. A list (or index lookup) finds
// objects only where the resource has some: the namespaces the cache knows
// that hold none of it need no review. A stream keeps every known
// namespace, as objects may appear there later. Either is narrowed to the
// namespaces the caller might be allowed in (knownNamespaces).
func (a access) candidateNamespaces(verb string, res cache.Resource) ([]string, error) {
	if verb == auth.VerbList {
		held, err := a.s.r.NamespacesOf(res.Name)
		if err != nil {
			return nil, err
		}
		return a.mightBeAllowed(verb, res, held), nil
	}
	return a.knownNamespaces(verb, res), nil
}

// knownNamespaces are the namespaces the cache knows where the caller
// might be allowed verb on res.
func (a access) knownNamespaces(verb string, res cache.Resource) []string {
	return a.mightBeAllowed(verb, res, a.s.r.Namespaces())
}

// mightBeAllowed keeps of namespaces (sorted) those where the
// NamespaceFinder says the caller might be allowed verb on res: with
// --namespace-access=rbac, those where a RoleBinding grants it, each still
// to be asked about. A restricted caller in a cluster of thousands of
// namespaces, all holding objects, is then asked about the few it is
// bound in, not about thousands.
func (a access) mightBeAllowed(verb string, res cache.Resource, namespaces []string) []string {
	f := a.s.opts.Auth.Namespaces
	if f == nil {
		return namespaces
	}
	granted, all := f.Namespaces(a.user, verb, res.Group, res.Plural)
	if all {
		return namespaces
	}
	return slices.DeleteFunc(namespaces, func(ns string) bool {
		_, found := slices.BinarySearch(granted, ns)
		return !found
	})
}
