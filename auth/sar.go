package auth

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// AccessReviewOptions configures AccessReviewer.
type AccessReviewOptions struct {
	// Cache defaults: allowed and denied answers 10s each, 16384 entries, a
	// stale grace of 5 minutes.
	Cache CacheOptions
	// InFlightPerUser bounds the reviews of one user asked at once; its
	// others wait for one of its own slots, so that a user who asks much
	// delays itself, not others. Default DefaultInFlightPerUser.
	InFlightPerUser int
	// WaitingPerUser bounds the reviews of one user waiting for a slot;
	// beyond, and for a review that waited longer than the review
	// timeout, Authorize fails with ErrTooManyAccessReviews without
	// asking. Default DefaultWaitingPerUser.
	WaitingPerUser int
}

// AccessReviewOptions' defaults.
const (
	DefaultInFlightPerUser = 16
	DefaultWaitingPerUser  = 256
)

// AccessReviewer authorizes with the Kubernetes SubjectAccessReview API:
// the API server answers with the cluster's own RBAC (and any other
// authorizer it runs), for the user the token belongs to. kubeindex's
// service account needs the ClusterRole system:auth-delegator.
type AccessReviewer struct {
	client authzclient.SubjectAccessReviewInterface
	cache  *decisionCache[decision]
	shares *userShares
}

type decision struct {
	allowed bool
	reason  string
}

// NewAccessReviewer builds an AccessReviewer on a client of the API server.
func NewAccessReviewer(client authzclient.SubjectAccessReviewInterface, o AccessReviewOptions) *AccessReviewer {
	co := o.Cache.withDefaults(10*time.Second, 10*time.Second, 16384, 5*time.Minute)
	if o.InFlightPerUser <= 0 {
		o.InFlightPerUser = DefaultInFlightPerUser
	}
	if o.WaitingPerUser <= 0 {
		o.WaitingPerUser = DefaultWaitingPerUser
	}
	return &AccessReviewer{client: client, cache: newDecisionCache(co, func(d decision) bool { return d.allowed }),
		shares: newUserShares(o.InFlightPerUser, o.WaitingPerUser)}
}

// NewAccessReviewerForConfig builds an AccessReviewer that uses the same
// cluster access as the cache.
func NewAccessReviewerForConfig(cfg *rest.Config, o AccessReviewOptions) (*AccessReviewer, error) {
	c, err := authzclient.NewForConfig(reviewConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("SubjectAccessReview client: %w", err)
	}
	return NewAccessReviewer(c.SubjectAccessReviews(), o), nil
}

// Authorize implements Authorizer.
func (a *AccessReviewer) Authorize(ctx context.Context, at Attributes) (bool, string, error) {
	if at.User == nil {
		return false, "no user", nil
	}
	d, err := a.cache.get(ctx, attributesKey(at), func(ctx context.Context) (decision, error) {
		release, err := a.shares.acquire(ctx, at.User.Name)
		if err != nil {
			return decision{}, err
		}
		defer release()
		return a.review(ctx, at)
	})
	return d.allowed, d.reason, err
}

func (a *AccessReviewer) review(ctx context.Context, at Attributes) (decision, error) {
	spec := authzv1.SubjectAccessReviewSpec{User: at.User.Name, UID: at.User.UID, Groups: at.User.Groups}
	if len(at.User.Extra) > 0 {
		spec.Extra = make(map[string]authzv1.ExtraValue, len(at.User.Extra))
		for k, v := range at.User.Extra {
			spec.Extra[k] = authzv1.ExtraValue(v)
		}
	}
	if at.Path != "" {
		spec.NonResourceAttributes = &authzv1.NonResourceAttributes{Path: at.Path, Verb: at.Verb}
	} else {
		spec.ResourceAttributes = &authzv1.ResourceAttributes{Namespace: at.Namespace, Verb: at.Verb,
			Group: at.Group, Resource: at.Resource, Subresource: at.Subresource, Name: at.Name}
	}
	sar, err := a.client.Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("%w: SubjectAccessReview: %v", ErrUnavailable, err)
	}
	return decision{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: sar.Status.Reason}, nil
}

// attributesKey identifies a question: the whole user (name, uid, groups
// and extra, order-independent) and the whole request.
func attributesKey(at Attributes) [32]byte {
	parts := []string{at.Verb, at.Group, at.Resource, at.Subresource, at.Namespace, at.Name, at.Path, at.User.Name, at.User.UID}
	parts = append(parts, strconv.Itoa(len(at.User.Groups)))
	parts = append(parts, slices.Sorted(slices.Values(at.User.Groups))...)
	for _, k := range slices.Sorted(maps.Keys(at.User.Extra)) {
		parts = append(parts, k, strconv.Itoa(len(at.User.Extra[k])))
		parts = append(parts, at.User.Extra[k]...)
	}
	return cacheKey(parts...)
}

// Stats implements StatsReporter.
func (a *AccessReviewer) Stats() Stats { return a.cache.stats() }
