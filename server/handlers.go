package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/query"
)

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// ReadyResource is one resource's line in /readyz.
type ReadyResource struct {
	Name            string `json:"name"`
	Synced          bool   `json:"synced"`
	WatchConnected  bool   `json:"watchConnected"`
	Stale           bool   `json:"stale"`
	Count           int64  `json:"count"`
	ResourceVersion string `json:"resourceVersion"`
	LastError       string `json:"lastError,omitempty"`
}

// readyz is 200 once every informer has synced. A stale cache (watch down)
// stays ready on purpose: answering from the cache during an API-server
// outage is the point, and the detail says it is stale.
func (s *Server) readyz(c echo.Context) error {
	if s.fleetFront() {
		return s.fleetReadyz(c)
	}
	all := s.r.Resources()
	body := struct {
		Ready     bool            `json:"ready"`
		Stale     bool            `json:"stale"`
		Simulated bool            `json:"simulated,omitempty"`
		Resources []ReadyResource `json:"resources,omitempty"`
	}{Ready: true, Simulated: s.opts.Simulated, Resources: []ReadyResource{}}
	for _, st := range all {
		body.Ready = body.Ready && st.Synced
		body.Stale = body.Stale || st.Stale
		body.Resources = append(body.Resources, ReadyResource{st.Name, st.Synced, st.WatchConnected,
			st.Stale, st.Count, st.ResourceVersion, st.LastError})
	}
	code := http.StatusOK
	if !body.Ready {
		code = http.StatusServiceUnavailable
	}
	if s.authenticating() {
		body.Resources = nil // public: the verdict only; the detail is in /api/v1/resources
	}
	return c.JSON(code, body)
}

func (s *Server) listResources(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	resources, err := s.visibleResources(c, s.r.Resources())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		Kind      string `json:"kind"`
		Simulated bool   `json:"simulated"`
		Resources any    `json:"resources"` // []cache.Status, or views of them when authorizing
	}{"ResourceList", s.opts.Simulated, resources})
}

func (s *Server) getResource(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	name, err := pathParam(c, "resource")
	if err != nil {
		return err
	}
	st, err := s.r.ResourceStatus(name)
	if err != nil {
		return err
	}
	view, detail, err := s.visibleResource(c, st)
	if err != nil {
		return err
	}
	s.setFreshness(c, st.Freshness, detail)
	return c.JSON(http.StatusOK, view)
}

func (s *Server) list(c echo.Context) error {
	if c.QueryParams().Has("watch") {
		return s.watch(c)
	}
	q, err := queryParams(c, "namespace", "labelSelector", "index", "value", "limit", "continue",
		"filter", "sort", "offset", "fields", "resourceVersion", "snapshot", "diff")
	if err != nil {
		return err
	}
	for _, p := range []string{"resourceVersion", "snapshot", "diff"} {
		if q.Has(p) {
			return fmt.Errorf("%w: %s applies to streams: add watch=true", errBadRequest, p)
		}
	}
	resource, err := pathParam(c, "resource")
	if err != nil {
		return err
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	var ask *cache.Ask
	var fields *query.Projection
	if asks(q) || q.Get("fields") != "" {
		sc, err := s.schema(resource)
		if err != nil {
			return err
		}
		if asks(q) {
			if ask, err = parseAsk(q, sc); err != nil {
				return err
			}
		}
		now := time.Now()
		if ask != nil {
			now = ask.Now // ages printed as the question measured them
		}
		if fields, err = sc.ParseFields(q.Get("fields"), now); err != nil {
			return err
		}
	}
	lq := cache.ListQuery{
		Ask:           ask,
		Namespace:     q.Get("namespace"),
		LabelSelector: q.Get("labelSelector"),
		Index:         q.Get("index"),
		Value:         q.Get("value"),
		Limit:         limit,
		Continue:      q.Get("continue"),
	}
	if err := s.restrictList(c, resource, &lq); err != nil {
		return err
	}
	res, err := s.r.List(resource, lq)
	s.setResourceFreshness(c, resource, res.Freshness)
	if err != nil {
		return err
	}
	if fields != nil {
		return writeProjected(c.Response(), res, fields)
	}
	return writeList(c.Response(), heldConn(c), res)
}

func (s *Server) getNamespaced(c echo.Context) error {
	return s.get(c, true)
}

func (s *Server) getClusterScoped(c echo.Context) error {
	return s.get(c, false)
}

func (s *Server) get(c echo.Context, namespaced bool) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	resource, err := pathParam(c, "resource")
	if err != nil {
		return err
	}
	name, err := pathParam(c, "name")
	if err != nil {
		return err
	}
	var namespace string
	if namespaced {
		if namespace, err = pathParam(c, "namespace"); err != nil {
			return err
		}
	}
	if err := s.authorizeGet(c, resource, namespace, name); err != nil {
		return err
	}
	obj, fresh, err := s.r.Get(resource, namespace, name)
	s.setResourceFreshness(c, resource, fresh)
	if err != nil {
		return err
	}
	return writeStored(c, obj)
}

func (s *Server) indexValues(c echo.Context) error {
	q, err := queryParams(c, "limit", "continue")
	if err != nil {
		return err
	}
	resource, err := pathParam(c, "resource")
	if err != nil {
		return err
	}
	index, err := pathParam(c, "index")
	if err != nil {
		return err
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	if err := s.authorizeClusterList(c, resource); err != nil {
		return err
	}
	res, err := s.r.IndexValues(resource, index, limit, q.Get("continue"))
	s.setResourceFreshness(c, resource, res.Freshness)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, IndexValuesResponse{
		Kind: "IndexValues", Resource: res.Resource.Name, Index: res.Index,
		Metadata: ListMeta{ResourceVersion: res.Freshness.ResourceVersion, Continue: res.Continue, Remaining: res.Remaining},
		Values:   res.Values,
	})
}

// fleetReadyz is a fleet front's /readyz: the fleet's verdict (Clusters'
// Ready), with each cluster's state unless callers authenticate.
func (s *Server) fleetReadyz(c echo.Context) error {
	states := s.opts.Clusters.States()
	body := struct {
		Ready    bool           `json:"ready"`
		Stale    bool           `json:"stale"`
		Clusters []ClusterState `json:"clusters,omitempty"`
	}{Ready: s.opts.Clusters.Ready()}
	for _, st := range states {
		body.Stale = body.Stale || st.State == ClusterStale
	}
	if !s.authenticating() {
		body.Clusters = states
	}
	code := http.StatusOK
	if !body.Ready {
		code = http.StatusServiceUnavailable
	}
	return c.JSON(code, body)
}
