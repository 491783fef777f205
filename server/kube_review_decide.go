package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	authzv1 "k8s.io/api/authorization/v1"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
)

// How kubeindex answers the self reviews: exactly as it would decide the
// caller's own requests to /k8s.
//
//   - get, list and watch of a served resource (get of its status or scale
//     subresource): the authorizer's answer for those attributes, with its
//     reason; with authorization off, allowed;
//   - any other verb: denied, kubeindex is read-only; a resource, group or
//     subresource it does not serve (or a wildcard, which names resources
//     it does not serve): denied, saying so;
//   - create of a self review: allowed, kubeindex answers them itself;
//   - the non-resource URLs of discovery, with get: allowed, as for any
//     authenticated caller; other URLs: denied.
//
// Selectors in a question are validated but do not change the answer:
// kubeindex authorizes a list by its verb, resource and namespace alone.

// The reasons of kubeindex's own refusals; a client shows them (kubectl
// auth can-i prints "no - <reason>").
const (
	reasonReadOnly = "kubeindex is a read-only cache of the cluster: it serves get, list and watch; " +
		"send writes to the Kubernetes API server itself"
	reasonWildcard  = "kubeindex serves only the resources it caches, not every resource: ask about one by name"
	reasonReview    = "kubeindex answers this review itself, for any authenticated caller"
	reasonOpen      = "kubeindex serves what it caches to every caller: authorization is off"
	reasonDiscovery = "kubeindex serves discovery to any authenticated caller"
)

// kubeDiscoveryURLs are the non-resource URLs of /k8s, as the API
// server's system:discovery role names its own.
var kubeDiscoveryURLs = []string{"/api", "/api/*", "/apis", "/apis/*", "/openapi/v2", "/openapi/v3", "/openapi/v3/*", "/version", "/version/"}

func allowed(reason string) authzv1.SubjectAccessReviewStatus {
	return authzv1.SubjectAccessReviewStatus{Allowed: true, Reason: reason}
}

func denied(reason string) authzv1.SubjectAccessReviewStatus {
	return authzv1.SubjectAccessReviewStatus{Denied: true, Reason: reason}
}

// kubeResource finds a served resource by group and plural. The version
// does not matter, as it does not to RBAC.
func (s *Server) kubeResource(group, plural string) (cache.Resource, bool) {
	for _, r := range s.r.APIResources() {
		if r.Group == group && r.Plural == plural {
			return r, true
		}
	}
	return cache.Resource{}, false
}

// attributesFor maps a question about a resource onto the attributes
// kubeindex would authorize; or answers it, when kubeindex decides alone.
func (s *Server) attributesFor(ra authzv1.ResourceAttributes) (auth.Attributes, *authzv1.SubjectAccessReviewStatus) {
	answer := func(st authzv1.SubjectAccessReviewStatus) (auth.Attributes, *authzv1.SubjectAccessReviewStatus) {
		return auth.Attributes{}, &st
	}
	gr := ra.Resource
	if ra.Group != "" {
		gr += "." + ra.Group
	}
	switch {
	case ra.Verb == "create" && ra.Subresource == "" && isKubeReview(ra.Group, ra.Resource):
		return answer(allowed(reasonReview))
	case !slices.Contains(kubeVerbs, ra.Verb):
		return answer(denied(reasonReadOnly))
	case ra.Group == "*" || ra.Resource == "*" || ra.Subresource == "*":
		return answer(denied(reasonWildcard))
	}
	res, ok := s.kubeResource(ra.Group, ra.Resource)
	if !ok {
		return answer(denied(fmt.Sprintf("kubeindex does not serve %s: it serves only the resources it caches", gr)))
	}
	if ra.Subresource != "" && (ra.Verb != "get" || !servedSubresource(res, ra.Subresource)) {
		return answer(denied(fmt.Sprintf("kubeindex does not serve %s of the subresource %s/%s: it serves get of status (and scale, of the built-in kinds that have it); "+
			"send other requests to the Kubernetes API server itself", ra.Verb, gr, ra.Subresource)))
	}
	if !s.authorizing() {
		return answer(allowed(reasonOpen))
	}
	return auth.Attributes{Verb: ra.Verb, Group: res.Group, Resource: res.Plural, Subresource: ra.Subresource,
		Namespace: ra.Namespace, Name: ra.Name}, nil
}

// pathReview answers a question about a non-resource URL.
func pathReview(na authzv1.NonResourceAttributes) authzv1.SubjectAccessReviewStatus {
	if na.Verb != "get" {
		return denied(reasonReadOnly)
	}
	for _, u := range kubeDiscoveryURLs {
		if prefix, ok := strings.CutSuffix(u, "*"); ok && strings.HasPrefix(na.Path, prefix) || na.Path == u {
			return allowed(reasonDiscovery)
		}
	}
	return denied(fmt.Sprintf("kubeindex does not serve %q in its Kubernetes API", na.Path))
}

// review answers a SelfSubjectAccessReview's question for the caller. An
// authorizer that cannot answer makes an evaluationError, as on the API
// server, not a failed request; one that refuses to be asked so often is
// a 429.
func (a access) review(spec authzv1.SelfSubjectAccessReviewSpec) (authzv1.SubjectAccessReviewStatus, error) {
	if na := spec.NonResourceAttributes; na != nil {
		return pathReview(*na), nil
	}
	at, st := a.s.attributesFor(*spec.ResourceAttributes)
	if st != nil {
		return *st, nil
	}
	ans := a.askAll([]auth.Attributes{at})[0]
	return ans.status()
}

// authzAnswer is the authorizer's answer to one question.
type authzAnswer struct {
	allowed bool
	reason  string
	err     error
}

func (ans authzAnswer) status() (authzv1.SubjectAccessReviewStatus, error) {
	switch {
	case errors.Is(ans.err, auth.ErrTooManyAccessReviews):
		return authzv1.SubjectAccessReviewStatus{}, errTooManyAccessReviews
	case ans.err != nil:
		return authzv1.SubjectAccessReviewStatus{EvaluationError: "access could not be checked (the API server did not authzAnswer); try again"}, nil
	}
	return authzv1.SubjectAccessReviewStatus{Allowed: ans.allowed, Reason: ans.reason}, nil
}

// askAll asks the authorizer each question for the caller, a few at a
// time.
func (a access) askAll(ats []auth.Attributes) []authzAnswer {
	out := make([]authzAnswer, len(ats))
	sem := make(chan struct{}, maxParallelReviews)
	var wg sync.WaitGroup
	for i, at := range ats {
		at.User = a.user
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(a.ctx, a.s.opts.Auth.Timeout)
			defer cancel()
			ans := &out[i]
			ans.allowed, ans.reason, ans.err = a.s.opts.Auth.Authorizer.Authorize(ctx, at)
			if ans.err != nil && !errors.Is(ans.err, auth.ErrTooManyAccessReviews) {
				a.s.log.Warn("authorization failed", "err", ans.err)
			}
		})
	}
	wg.Wait()
	return out
}

// rules answers a SelfSubjectRulesReview for the caller in namespace: the
// reads of each served resource (and its status and scale) that it would
// allow, the self reviews and discovery. When authorizing, kubeindex asks
// the authorizer each read of each resource; it cannot enumerate rules
// that name objects, so an answer that leaves any read out is marked
// incomplete, as the API server marks one it cannot list in full.
func (a access) rules(namespace string) (authzv1.SubjectRulesReviewStatus, error) {
	type question struct {
		group, resource string
		at              auth.Attributes
	}
	var qs []question
	for _, g := range kubeGroups(a.s.r.APIResources()) {
		for _, v := range g.versions {
			for _, r := range g.byVer[v] {
				ns := namespace
				if !r.Namespaced {
					ns = ""
				}
				for _, verb := range kubeVerbs {
					qs = append(qs, question{r.Group, r.Plural, auth.Attributes{Verb: verb, Group: r.Group, Resource: r.Plural, Namespace: ns}})
				}
				for _, sub := range r.Subresources {
					if servedSubresource(r, sub) {
						qs = append(qs, question{r.Group, r.Plural + "/" + sub,
							auth.Attributes{Verb: "get", Group: r.Group, Resource: r.Plural, Subresource: sub, Namespace: ns}})
					}
				}
			}
		}
	}
	st := authzv1.SubjectRulesReviewStatus{ResourceRules: []authzv1.ResourceRule{}}
	ok := make([]bool, len(qs))
	if !a.s.authorizing() {
		for i := range ok {
			ok[i] = true
		}
	} else {
		ats := make([]auth.Attributes, len(qs))
		for i, q := range qs {
			ats[i] = q.at
		}
		for i, ans := range a.askAll(ats) {
			if errors.Is(ans.err, auth.ErrTooManyAccessReviews) {
				return st, errTooManyAccessReviews
			}
			if ans.err != nil {
				st.EvaluationError = "some access could not be checked (the API server did not authzAnswer); try again"
			}
			ok[i] = ans.allowed
			st.Incomplete = st.Incomplete || !ans.allowed
		}
	}
	// One rule per group and set of verbs, in discovery's order.
	type ruleKey struct{ group, verbs string }
	var order []ruleKey
	byKey := map[ruleKey]*authzv1.ResourceRule{}
	for i := 0; i < len(qs); {
		j := i
		var verbs []string
		for ; j < len(qs) && qs[j].group == qs[i].group && qs[j].resource == qs[i].resource; j++ {
			if ok[j] {
				verbs = append(verbs, qs[j].at.Verb)
			}
		}
		if len(verbs) > 0 {
			k := ruleKey{qs[i].group, strings.Join(verbs, ",")}
			if byKey[k] == nil {
				order = append(order, k)
				byKey[k] = &authzv1.ResourceRule{Verbs: verbs, APIGroups: []string{qs[i].group}}
			}
			byKey[k].Resources = append(byKey[k].Resources, qs[i].resource)
		}
		i = j
	}
	for _, k := range order {
		st.ResourceRules = append(st.ResourceRules, *byKey[k])
	}
	reviews := map[string][]string{}
	for _, r := range kubeReviewResources {
		reviews[r.Group] = append(reviews[r.Group], r.Plural)
	}
	for _, g := range []string{authzv1.GroupName, "authentication.k8s.io"} {
		st.ResourceRules = append(st.ResourceRules, authzv1.ResourceRule{Verbs: kubeReviewVerbs, APIGroups: []string{g}, Resources: reviews[g]})
	}
	st.NonResourceRules = []authzv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: kubeDiscoveryURLs}}
	return st, nil
}
