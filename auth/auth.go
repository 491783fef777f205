// Package auth decides who a caller is and what it may read: bearer tokens
// checked against a static token file or the Kubernetes TokenReview API, and
// access checked with the Kubernetes SubjectAccessReview API, so that a
// caller of kubeindex sees what its own RBAC lets it see in the cluster.
//
// Decisions that cost an API call are cached briefly, in bounded caches,
// and concurrent identical questions are asked once. The package knows
// nothing of HTTP: the server extracts the token and maps the answers to
// status codes.
package auth

import (
	"context"
	"errors"
)

// User is an authenticated caller, as Kubernetes describes users.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Extra is what the authenticator added (service account pod names,
	// token scopes); SubjectAccessReviews pass it on.
	Extra map[string][]string
}

// Authenticator checks a bearer token. Implementations are safe for
// concurrent use.
type Authenticator interface {
	// AuthenticateToken returns the token's user, or ok false when the token
	// is not valid. An error means no decision could be made (the API server
	// is unreachable): the caller should be told to retry, not that its
	// token is bad.
	AuthenticateToken(ctx context.Context, token string) (u *User, ok bool, err error)
}

// Verbs kubeindex asks about. It never asks about writes.
const (
	VerbGet   = "get"
	VerbList  = "list"
	VerbWatch = "watch"
)

// Attributes is one question: may User do Verb on this resource in this
// namespace (or on this non-resource path)?
type Attributes struct {
	User *User
	Verb string
	// Group and Resource name the API resource: "" and "pods", "apps" and
	// "deployments".
	Group, Resource string
	// Subresource names a subresource of Resource ("status", "scale"), as
	// RBAC names it after a slash ("pods/status"); "" for the resource.
	Subresource string
	// Namespace is "" for a question about all namespaces, or about a
	// cluster-scoped resource.
	Namespace string
	// Name narrows a get to one object (RBAC resourceNames); "" otherwise.
	Name string
	// Path is set, instead of Group and Resource, for a non-resource URL
	// such as /metrics.
	Path string
}

// Authorizer answers questions about access. Implementations are safe for
// concurrent use.
type Authorizer interface {
	// Authorize reports whether a is allowed, with the reason the
	// authorizer gave. An error means no decision could be made; callers
	// must deny.
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// ErrNotCached is returned by an authorizer asked under CachedOnly when
// it holds no decision for the question: none was made, and none asked.
var ErrNotCached = errors.New("no cached decision, and the authorizer was not asked")

type cachedOnlyKey struct{}

// CachedOnly marks ctx so that an authorizer that caches its decisions
// answers from its cache alone (a decision kept past its freshness, within
// its grace, included) and otherwise fails with ErrNotCached rather than
// asking its backend. An authorizer that keeps no cache ignores it.
func CachedOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, cachedOnlyKey{}, true)
}

func cachedOnly(ctx context.Context) bool {
	v, _ := ctx.Value(cachedOnlyKey{}).(bool)
	return v
}

// ErrUnavailable wraps every failure to reach the service that decides
// (TokenReview, SubjectAccessReview): the answer is "try again", not "no".
var ErrUnavailable = errors.New("authentication or authorization service unavailable")

// Stats counts an authenticator's or authorizer's decisions and cache use,
// for metrics. All counters only grow.
type Stats struct {
	Allowed, Denied, Errors uint64
	// CacheHits are answers from the cache; CacheMisses needed a review.
	CacheHits, CacheMisses uint64
	// StaleHits are expired answers used because the review failed.
	StaleHits uint64
}

// StatsReporter is implemented by authenticators and authorizers that keep
// Stats.
type StatsReporter interface {
	Stats() Stats
}
