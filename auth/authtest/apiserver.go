// Package authtest is a fake Kubernetes API server that answers
// TokenReviews and SubjectAccessReviews from a table, over real HTTP, for
// tests of authentication and authorization: the same client-go clients as
// production talk to it, and it counts the reviews it was asked for.
package authtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/auth"
)

// Rule allows User (or any member of Group) Verbs on Resource ("pods", or
// "pods/status" for a subresource) in the API group APIGroup, in Namespace ("" = every namespace and cluster-scoped
// objects), or on the non-resource URL Path.
type Rule struct {
	User, Group string
	Verbs       []string
	APIGroup    string
	Resource    string
	Namespace   string
	Path        string
}

// Server is the fake API server. Its tables may be changed between
// requests with SetTokens, SetRules and SetDown.
type Server struct {
	URL string

	mu     sync.Mutex
	tokens map[string]auth.User
	rules  []Rule
	down   bool

	TokenReviews, AccessReviews atomic.Int64
}

// New starts a fake API server that the test stops.
func New(t testing.TB, tokens map[string]auth.User, rules ...Rule) *Server {
	s := &Server{tokens: tokens, rules: rules}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Config is cluster access to the fake server. It speaks JSON only.
func (s *Server) Config() *rest.Config {
	return &rest.Config{Host: s.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
}

// SetTokens replaces the valid tokens.
func (s *Server) SetTokens(tokens map[string]auth.User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = tokens
}

// SetRules replaces the rules.
func (s *Server) SetRules(rules ...Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = rules
}

// SetDown makes every review fail with 503, as during an outage.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Reviews returns how many token and access reviews were asked for.
func (s *Server) Reviews() (tokenReviews, accessReviews int64) {
	return s.TokenReviews.Load(), s.AccessReviews.Load()
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	switch {
	case r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json":
		http.Error(w, "only reviews are served", http.StatusMethodNotAllowed)
	case down:
		http.Error(w, "down", http.StatusServiceUnavailable)
	case r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
		s.TokenReviews.Add(1)
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tr.Status = s.review(tr.Spec.Token)
		writeJSON(w, "TokenReview", "authentication.k8s.io/v1", &tr, &tr.TypeMeta.Kind, &tr.TypeMeta.APIVersion)
	case r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		s.AccessReviews.Add(1)
		var sar authzv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sar.Status.Allowed = s.allowed(sar.Spec)
		if !sar.Status.Allowed {
			sar.Status.Reason = "no rule allows it"
		}
		writeJSON(w, "SubjectAccessReview", "authorization.k8s.io/v1", &sar, &sar.TypeMeta.Kind, &sar.TypeMeta.APIVersion)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, kind, apiVersion string, v any, kindField, apiVersionField *string) {
	*kindField, *apiVersionField = kind, apiVersion
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) review(token string) authnv1.TokenReviewStatus {
	s.mu.Lock()
	u, ok := s.tokens[token]
	s.mu.Unlock()
	if !ok {
		return authnv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	info := authnv1.UserInfo{Username: u.Name, UID: u.UID, Groups: append(slices.Clone(u.Groups), "system:authenticated")}
	for k, v := range u.Extra {
		if info.Extra == nil {
			info.Extra = map[string]authnv1.ExtraValue{}
		}
		info.Extra[k] = v
	}
	return authnv1.TokenReviewStatus{Authenticated: true, User: info}
}

func (s *Server) allowed(spec authzv1.SubjectAccessReviewSpec) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rules {
		if r.User != spec.User && (r.Group == "" || !slices.Contains(spec.Groups, r.Group)) {
			continue
		}
		if ra := spec.ResourceAttributes; ra != nil && r.Path == "" {
			resource := ra.Resource
			if ra.Subresource != "" {
				resource += "/" + ra.Subresource // as RBAC names it
			}
			if slices.Contains(r.Verbs, ra.Verb) && r.APIGroup == ra.Group && r.Resource == resource &&
				(r.Namespace == "" || r.Namespace == ra.Namespace) {
				return true
			}
		}
		if na := spec.NonResourceAttributes; na != nil && r.Path != "" {
			if slices.Contains(r.Verbs, na.Verb) && r.Path == na.Path {
				return true
			}
		}
	}
	return false
}
