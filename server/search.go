package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/query"
)

// Search across resources (docs/query.md, "Search"): GET /api/v1/search.

// Bounds of a search's page: a search box shows a few dozen hits.
const (
	defaultSearchLimit = 50
	maxSearchLimit     = 1000
)

// SearchResponse is the body of GET /api/v1/search.
type SearchResponse struct {
	Kind string `json:"kind"`
	// Total is the number of hits in all, the same on every page.
	Total int `json:"total"`
	// Continue pages on; "" on the last page.
	Continue string       `json:"continue"`
	Items    []SearchItem `json:"items"`
}

// SearchItem is one object found and what of it matched.
type SearchItem struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Rank      string `json:"rank"`  // exact, prefix, substring
	Match     string `json:"match"` // name, label, ip
	// Key is what matched: metadata.name, the label's path, or the field
	// the address is read from; Value is its value.
	Key    string          `json:"key"`
	Value  string          `json:"value"`
	Object json.RawMessage `json:"object"`
}

// searchProjection is what a hit shows of its object: what identifies it
// and its labels, never its spec, data or annotations.
var searchProjection, _ = query.ParseFields("metadata.labels")

// searchParams are a search's parameters, read.
type searchParams struct {
	text      string
	resources []cache.Resource // nil: every resource
	namespace string
	limit     int
	cont      string
}

// parseSearch reads a search's parameters; resolve names the resources.
// Errors are 400s naming the parameter.
func parseSearch(q url.Values, resolve func(string) (cache.Resource, error)) (searchParams, error) {
	p := searchParams{text: strings.TrimSpace(q.Get("q")), namespace: q.Get("namespace"), cont: q.Get("continue"), limit: defaultSearchLimit}
	switch {
	case p.text == "":
		return p, fmt.Errorf("%w: q: the text to search for is required and must not be blank", errBadRequest)
	case len(p.text) > cache.MaxSearchText:
		return p, fmt.Errorf("%w: q: at most %d bytes (the longest name), got %d", errBadRequest, cache.MaxSearchText, len(p.text))
	}
	if q.Has("resources") {
		p.resources = []cache.Resource{}
		for i, name := range strings.Split(q.Get("resources"), ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				return p, fmt.Errorf("%w: resources: item %d is empty (a comma-separated list of resources)", errBadRequest, i+1)
			}
			res, err := resolve(name)
			if errors.Is(err, cache.ErrUnknownResource) {
				return p, fmt.Errorf("%w: resources: %v", errBadRequest, err)
			}
			if err != nil {
				return p, err
			}
			if p.namespace != "" && !res.Namespaced {
				return p, fmt.Errorf("%w: resources: %s is cluster-scoped: namespace does not apply to it", errBadRequest, res.Name)
			}
			for _, have := range p.resources {
				if have.Name == res.Name {
					return p, fmt.Errorf("%w: resources: %s is named twice", errBadRequest, text.Truncate(name, 64))
				}
			}
			p.resources = append(p.resources, res)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSearchLimit {
			return p, fmt.Errorf("%w: limit: an integer from 1 to %d, got %q", errBadRequest, maxSearchLimit, text.Truncate(v, 32))
		}
		p.limit = n
	}
	return p, nil
}

// search answers GET /api/v1/search.
func (s *Server) search(c echo.Context) error {
	q, err := queryParams(c, "q", "resources", "namespace", "limit", "continue")
	if err != nil {
		return err
	}
	p, err := parseSearch(q, s.r.Resolve)
	if err != nil {
		return err
	}
	targets, err := s.searchTargets(c, p)
	if err != nil {
		return err
	}
	res, err := s.r.Search(cache.SearchQuery{Text: p.text, Targets: targets, Namespace: p.namespace, Limit: p.limit, Continue: p.cont})
	if err != nil {
		return err
	}
	body := SearchResponse{Kind: "SearchResult", Total: res.Total, Continue: res.Continue, Items: make([]SearchItem, 0, len(res.Hits))}
	for _, h := range res.Hits {
		body.Items = append(body.Items, SearchItem{Resource: h.Resource.Name, Namespace: h.Object.Namespace(), Name: h.Object.Name(),
			Rank: h.Rank.String(), Match: h.Match.String(), Key: h.Key, Value: h.Value,
			Object: searchProjection.Apply(nil, h.Object.Raw())})
	}
	return c.JSON(http.StatusOK, body)
}

// searchTargets are the resources a search reads and, for a caller
// confined by authorization, where in each, decided as a list's
// (restrictList). A resource named in resources= that the caller may not
// list is a 403, as its list is; of every resource (none named), those it
// may list nowhere are left out, so it learns nothing of them.
// Cluster-scoped resources are left out when a namespace is asked.
func (s *Server) searchTargets(c echo.Context, p searchParams) ([]cache.SearchTarget, error) {
	named := p.resources != nil
	resources := p.resources
	if !named {
		for _, st := range s.r.Resources() {
			resources = append(resources, st.Resource)
		}
	}
	a := s.accessFor(c)
	targets := []cache.SearchTarget{}
	var refused error
	for _, res := range resources {
		if p.namespace != "" && !res.Namespaced {
			continue
		}
		namespaces, err := a.scope(auth.VerbList, res, p.namespace)
		var he *echo.HTTPError
		if !named && errors.As(err, &he) && he.Code == http.StatusForbidden {
			refused = err
			continue
		}
		if err != nil {
			return nil, err
		}
		targets = append(targets, cache.SearchTarget{Resource: res.Name, Namespaces: namespaces})
	}
	if len(targets) == 0 && refused != nil {
		where := ""
		if p.namespace != "" {
			where = fmt.Sprintf(" in the namespace %q", text.Truncate(p.namespace, 128))
		}
		return nil, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("forbidden: User %q cannot list any cached resource%s", a.userName(), where))
	}
	return targets, nil
}
