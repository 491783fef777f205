package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/ipowner"
)

// The authorization policy (README "Security"):
//
//   - one object: get on it, in its namespace;
//   - a list, an index lookup, an IP lookup: list; a stream: watch. In one
//     namespace: that namespace. Across namespaces: everything when allowed
//     cluster-wide, else only the namespaces where it is allowed (those the
//     cache knows where RBAC might allow it are asked about:
//     candidateNamespaces), else 403;
//   - an IP lookup answers with the holders the caller may list (pods,
//     Services, Nodes), classified from those alone; what it may list is
//     decided before the lookup, from the caller alone (ipVisibility);
//   - index values and object counts are cluster-wide figures: they need
//     list cluster-wide (index values: 403; counts: left out);
//   - /metrics: get on the non-resource URL /metrics, as the API server's.

// authorizing reports whether requests are checked against an authorizer.
func (s *Server) authorizing() bool { return s.opts.Auth.Authorizer != nil }

// access asks the authorizer about one caller. It holds no echo Context,
// so streams may keep it.
type access struct {
	s    *Server
	ctx  context.Context
	user *auth.User
}

func (s *Server) accessFor(c echo.Context) access {
	return access{s: s, ctx: c.Request().Context(), user: userOf(c)}
}

// maxParallelReviews bounds the reviews one request has in flight while
// enumerating namespaces.
const maxParallelReviews = 16

func (a access) decide(at auth.Attributes) (bool, error) {
	at.User = a.user
	ctx, cancel := context.WithTimeout(a.ctx, a.s.opts.Auth.Timeout)
	defer cancel()
	part, inPart := a.ctx.Value(clusterPartKey{}).(partAccess)
	if inPart && part.unreachable {
		ctx = auth.CachedOnly(ctx)
	}
	ok, _, err := a.s.opts.Auth.Authorizer.Authorize(ctx, at)
	if errors.Is(err, auth.ErrTooManyAccessReviews) {
		return false, errTooManyAccessReviews
	}
	switch {
	case err == nil:
		if !inPart || !part.unreachable { // else from the cache: says nothing of the API server
			a.s.reviewsFailing.Store(false)
		}
		return ok, nil
	case inPart && errors.Is(err, auth.ErrNotCached):
		return false, retryLater(fmt.Sprintf("authorization could not be asked: cluster %q is %s and its API server did not answer its last access review; no decision for this caller is cached there; try again", part.name, part.state))
	}
	a.s.reviewsFailing.Store(true)
	switch {
	case inPart && errors.Is(a.ctx.Err(), context.DeadlineExceeded):
		a.s.log.Warn("authorization failed", "cluster", part.name, "err", err)
		return false, retryLater(fmt.Sprintf("authorization could not be asked: cluster %q's API server did not answer the access review within %s; try again", part.name, part.timeout))
	case inPart:
		a.s.log.Warn("authorization failed", "cluster", part.name, "err", err)
		return false, retryLater(fmt.Sprintf("authorization could not be asked: cluster %q's API server did not answer the access review; try again", part.name))
	}
	a.s.log.Warn("authorization failed", "err", err)
	return false, retryLater("access could not be checked (the API server did not answer); try again")
}

// clusterPartKey marks the context of one cluster's part of an answer
// across clusters (a list, counts, an IP lookup): its value, a
// partAccess, bounds and words that cluster's access reviews.
type clusterPartKey struct{}

type partAccess struct {
	name    string
	state   string // the cluster's state when the answer began, if read
	timeout time.Duration
	// unreachable: the cluster is stale or failed and its last access
	// review failed: its API server does not answer; only cached
	// decisions are used there.
	unreachable bool
}

// ClusterPartContext is the context in which cluster name, served by s,
// decides its part of an answer across clusters. Each cluster's access
// reviews get their own deadline, AuthOptions.ClusterTimeout, so that one
// whose API server hangs holds the answer up by that much at most (the
// parts are asked concurrently); a cluster stale or failed whose last
// review failed (its API server does not answer) is not asked at all,
// its cached decisions only are used. A review that
// fails or runs out of time makes that cluster's part a 503 saying
// "authorization could not be asked" and is not remembered as a denial.
// A request under the cluster's own prefix is not such a part: it asks,
// bounded by AuthOptions.Timeout. Call the CancelFunc when the part is
// done. Streams across clusters may use it for each cluster's decisions.
func (s *Server) ClusterPartContext(ctx context.Context, name string) (context.Context, context.CancelFunc) {
	if !s.authorizing() {
		return ctx, func() {}
	}
	part := partAccess{name: name, timeout: s.opts.Auth.ClusterTimeout}
	if s.reviewsFailing.Load() { // only then is its state read: StateOf visits every resource
		part.state = StateOf(name, s.r).State
		part.unreachable = part.state == ClusterStale || part.state == ClusterFailed
	}
	ctx, cancel := context.WithTimeout(ctx, part.timeout)
	return context.WithValue(ctx, clusterPartKey{}, part), cancel
}

// allow returns nil or the 403 (503 when no decision could be made).
func (a access) allow(verb string, res cache.Resource, namespace, name string) error {
	if !a.s.authorizing() {
		return nil
	}
	ok, err := a.decideObject(auth.Attributes{Verb: verb, Group: res.Group, Resource: res.Plural, Namespace: namespace, Name: name})
	if err != nil || ok {
		return err
	}
	return a.forbidden(verb, res, namespace)
}

func (a access) allowPath(verb, path string) error {
	if !a.s.authorizing() {
		return nil
	}
	ok, err := a.decide(auth.Attributes{Verb: verb, Path: path})
	if err != nil || ok {
		return err
	}
	return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("forbidden: User %q cannot %s path %q", a.userName(), verb, path))
}

// forbidden words a refusal as the API server does.
func (a access) forbidden(verb string, res cache.Resource, namespace string) error {
	where := "at the cluster scope"
	if namespace != "" {
		where = fmt.Sprintf("in the namespace %q", text.Truncate(namespace, 128))
	} else if res.Namespaced && verb != auth.VerbGet {
		where = "at the cluster scope, nor in any namespace"
	}
	return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group %q %s",
		res.GroupResource(), a.userName(), verb, res.Plural, res.Group, where))
}

func (a access) userName() string {
	if a.user == nil {
		return "system:anonymous"
	}
	return a.user.Name
}

// scope says where the caller may verb res: nil for everywhere asked (the
// namespace given, or all of them), else the namespaces allowed, never
// empty (that is a 403).
func (a access) scope(verb string, res cache.Resource, namespace string) ([]string, error) {
	if !a.s.authorizing() {
		return nil, nil
	}
	if namespace != "" && len(validation.IsDNS1123Label(namespace)) > 0 {
		return nil, nil // no object can be there; the cache refuses the name
	}
	if namespace != "" || !res.Namespaced {
		return nil, a.allow(verb, res, namespace, "")
	}
	all, err := a.decide(auth.Attributes{Verb: verb, Group: res.Group, Resource: res.Plural})
	if err != nil || all {
		return nil, err
	}
	allowed, err := a.allowedNamespaces(verb, res)
	if err != nil {
		return nil, err
	}
	if len(allowed) == 0 {
		return nil, a.forbidden(verb, res, "")
	}
	return allowed, nil
}

// namespacesAllowed asks about each namespace, a few at a time. Any
// failure fails the whole: a partial answer would silently leave objects
// out.
func (a access) namespacesAllowed(verb string, res cache.Resource, namespaces []string) ([]string, error) {
	ok := make([]bool, len(namespaces))
	errs := make([]error, len(namespaces))
	sem := make(chan struct{}, maxParallelReviews)
	var wg sync.WaitGroup
	for i, ns := range namespaces {
		at := auth.Attributes{Verb: verb, Group: res.Group, Resource: res.Plural, Namespace: ns}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ok[i], errs[i] = a.decide(at)
		})
	}
	wg.Wait()
	var out []string
	for i, ns := range namespaces {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if ok[i] {
			out = append(out, ns)
		}
	}
	return out, nil
}

// restrictList confines a list (or index lookup) to where the caller may
// list.
func (s *Server) restrictList(c echo.Context, resource string, q *cache.ListQuery) error {
	return s.restrictListIn(c.Request().Context(), c, resource, q)
}

// restrictListIn is restrictList with the reviews under ctx (a
// ClusterPartContext for one cluster's part of an answer across clusters).
func (s *Server) restrictListIn(ctx context.Context, c echo.Context, resource string, q *cache.ListQuery) error {
	if !s.authorizing() {
		return nil
	}
	res, err := s.r.Resolve(resource)
	if err != nil {
		return err
	}
	q.Namespaces, err = access{s: s, ctx: ctx, user: userOf(c)}.scope(auth.VerbList, res, q.Namespace)
	return err
}

// restrictWatch confines a stream to where the caller may watch.
func (a access) restrictWatch(resource string, q *cache.WatchQuery) error {
	if !a.s.authorizing() {
		return nil
	}
	res, err := a.s.r.Resolve(resource)
	if err != nil {
		return err
	}
	q.Namespaces, err = a.scope(auth.VerbWatch, res, q.Namespace)
	return err
}

// authorizeGet checks get on one object.
func (s *Server) authorizeGet(c echo.Context, resource, namespace, name string) error {
	if !s.authorizing() {
		return nil
	}
	res, err := s.r.Resolve(resource)
	if err != nil {
		return err
	}
	if namespace != "" && !res.Namespaced {
		return nil // a malformed request; the cache says why
	}
	return s.accessFor(c).allow(auth.VerbGet, res, namespace, name)
}

// authorizeClusterList checks list across the cluster (index values).
func (s *Server) authorizeClusterList(c echo.Context, resource string) error {
	if !s.authorizing() {
		return nil
	}
	res, err := s.r.Resolve(resource)
	if err != nil {
		return err
	}
	return s.accessFor(c).allow(auth.VerbList, res, "", "")
}

// ipVisibility decides, before anything is looked up, which holders of
// any address the caller may see: per kind that answers IP lookups (pods,
// Services, Nodes), all of them when it may list the kind cluster-wide,
// else those in the namespaces where it may (the namespaces the cache
// knows where RBAC might allow it are asked about, as for a list across
// namespaces: mightBeAllowed). The questions
// depend on the caller alone, never on who holds the address asked about,
// so an unused address and one held only by objects the caller may not
// see cost the same reviews and get the same answer: 404, or 503 when the
// authorizer cannot answer. A caller who may list none of them anywhere
// is refused (403) whatever the address. nil when not authorizing.
func (a access) ipVisibility() (func(ipowner.Kind, string) bool, error) {
	if !a.s.authorizing() {
		return nil, nil
	}
	type kindAccess struct {
		all        bool
		namespaces []string // sorted
	}
	kinds := a.s.r.IPResources()
	decided := make(map[ipowner.Kind]kindAccess, len(kinds))
	var known []string
	some := len(kinds) == 0 // no kind answers: the cache says why
	for _, res := range kinds {
		all, err := a.decide(auth.Attributes{Verb: auth.VerbList, Group: res.Group, Resource: res.Plural})
		if err != nil {
			return nil, err
		}
		k := kindAccess{all: all}
		if !all && res.Namespaced {
			if known == nil {
				known = a.s.r.Namespaces()
			}
			candidates := a.mightBeAllowed(auth.VerbList, res, slices.Clone(known))
			if k.namespaces, err = a.namespacesAllowed(auth.VerbList, res, candidates); err != nil {
				return nil, err
			}
		}
		kind, _ := ipowner.KindOf(res.Plural) // the resources IP lookups answer from: pods, services, nodes
		decided[kind] = k
		some = some || all || len(k.namespaces) > 0
	}
	if !some {
		return nil, a.forbidden(auth.VerbList, kinds[0], "")
	}
	return func(kind ipowner.Kind, namespace string) bool {
		k, ok := decided[kind]
		if !ok || k.all {
			return ok
		}
		_, found := slices.BinarySearch(k.namespaces, namespace)
		return found
	}, nil
}

// resourceView is a resource's status without the cluster-wide figures a
// caller not allowed to list it cluster-wide may not see: its object and
// event counts, and its resourceVersion and last event, which move with
// every change in namespaces the caller may not read. The fields of the
// same JSON name here hide those of the embedded Status.
type resourceView struct {
	cache.Status
	Count           *int64             `json:"count,omitempty"`
	Events          *cache.EventCounts `json:"events,omitempty"`
	ResourceVersion *string            `json:"resourceVersion,omitempty"`
	LastEvent       *time.Time         `json:"lastEvent,omitempty"`
}

// visibleResource is st as the caller may see it: all of it when not
// authorizing (a cache.Status, byte for byte as before). detail reports
// whether it may see the figures.
func (s *Server) visibleResource(c echo.Context, st cache.Status) (view any, detail bool, err error) {
	if !s.authorizing() {
		return st, true, nil
	}
	ok, err := s.accessFor(c).decide(auth.Attributes{Verb: auth.VerbList, Group: st.Group, Resource: st.Plural})
	if err != nil {
		return nil, false, err
	}
	v := resourceView{Status: st}
	if ok {
		v.Count, v.Events, v.ResourceVersion = &st.Count, &st.Events, &st.ResourceVersion
		if !st.LastEvent.IsZero() {
			v.LastEvent = &st.LastEvent
		}
	}
	return v, ok, nil
}

// visibleResources is visibleResource for each.
func (s *Server) visibleResources(c echo.Context, all []cache.Status) (any, error) {
	if !s.authorizing() {
		return all, nil
	}
	out := make([]any, len(all))
	for i, st := range all {
		v, _, err := s.visibleResource(c, st)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
