package server

import (
	"cmp"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/query"
)

// FleetCountsResponse is the body of GET /api/v1/resources/{r}/counts
// on a fleet's front: the counts of every cluster that answered, added
// up (a group's values are the same in each cluster it is counted in;
// grouped by cluster, each cluster is a group of its own), and how each
// cluster took part.
type FleetCountsResponse struct {
	CountsResponse
	Clusters []ClusterSlot `json:"clusters"`
}

// fleetCounts answers the counts across clusters: each cluster counts
// its part, authorized there, grouped by the keys other than cluster;
// the front adds the groups up with the cluster's name in place.
func (s *Server) fleetCounts(c echo.Context) error {
	q, err := queryParams(c, "cluster", "namespace", "labelSelector", "index", "value", "filter", "groupBy")
	if err != nil {
		return err
	}
	resource, err := pathParam(c, "resource")
	if err != nil {
		return err
	}
	names, err := s.clusterNames(q.Get("cluster"))
	if err != nil {
		return err
	}
	fq := &fleetQuestion{resource: resource, q: q, now: time.Now()}
	body := FleetCountsResponse{CountsResponse: CountsResponse{Kind: "Counts", Resource: resource, GroupBy: []string{}, Groups: []CountGroup{}}}
	sums := map[[query.MaxGroupBy]query.Value]int{}
	parts := make([]*clusterPart, len(names))
	results := make([]cache.CountResult, len(names))
	groupBys := make([][]query.Key, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names { // at once, as a list's parts
		parts[i] = &clusterPart{slot: ClusterSlot{Cluster: name}}
		wg.Go(func() { results[i], groupBys[i], errs[i] = s.countPart(c, fq, parts[i]) })
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return err
	}
	for i, p := range parts {
		name, res, groupBy := p.slot.Cluster, results[i], groupBys[i]
		if p.slot.Status != http.StatusOK {
			continue
		}
		body.Total += res.Total
		body.GroupBy = body.GroupBy[:0]
		for _, k := range groupBy {
			body.GroupBy = append(body.GroupBy, k.String())
		}
		if len(groupBy) == 0 {
			continue
		}
		if len(query.LocalKeys(groupBy)) == 0 && res.Total > 0 { // by cluster only
			res.Groups = []query.Group{{Count: res.Total}}
		}
		for _, g := range res.Groups {
			var id [query.MaxGroupBy]query.Value
			copy(id[:], query.ClusterValues(groupBy, name, g.Values))
			sums[id] += g.Count
		}
	}
	if err := allUnknown(parts, resource); err != nil {
		return err
	}
	for id, n := range sums {
		body.Groups = append(body.Groups, CountGroup{Values: slices.Clone(id[:len(body.GroupBy)]), Count: n})
	}
	slices.SortFunc(body.Groups, func(a, b CountGroup) int { // as a single cluster's: largest first, then by values
		if x := cmp.Compare(b.Count, a.Count); x != 0 {
			return x
		}
		for i := range a.Values {
			if x := query.Compare(a.Values[i], b.Values[i]); x != 0 {
				return x
			}
		}
		return 0
	})
	for _, p := range parts {
		body.Clusters = append(body.Clusters, p.slot)
	}
	return c.JSON(http.StatusOK, body)
}

// countPart counts one cluster's part into p's slot; groupBy are the
// question's group keys (cluster included). An error is the caller's
// (a parameter that cannot be read).
func (s *Server) countPart(c echo.Context, fq *fleetQuestion, p *clusterPart) (cache.CountResult, []query.Key, error) {
	name := p.slot.Cluster
	cs, err := s.cluster(name)
	if err != nil {
		p.failed(err)
		return cache.CountResult{}, nil, nil
	}
	ask, _, groupBy, _, skip, err := fq.clusterAsk(cs, name, fq.q.Get("groupBy"))
	if err != nil {
		p.failed(err)
		return cache.CountResult{}, nil, callersError(err)
	}
	if skip {
		p.slot.Status, p.slot.State, p.slot.Total = http.StatusOK, ClusterSynced, new(int)
		return cache.CountResult{}, groupBy, nil
	}
	lq := cache.ListQuery{Namespace: fq.q.Get("namespace"), LabelSelector: fq.q.Get("labelSelector"),
		Index: fq.q.Get("index"), Value: fq.q.Get("value"), Ask: ask}
	pctx, cancel := cs.ClusterPartContext(c.Request().Context(), name)
	err = cs.restrictListIn(pctx, c, fq.resource, &lq)
	cancel()
	if err != nil {
		p.failed(err)
		return cache.CountResult{}, nil, callersError(err)
	}
	res, err := cs.r.Count(fq.resource, lq, query.LocalKeys(groupBy))
	if err != nil {
		p.failed(err)
		return res, nil, callersError(err)
	}
	total := res.Total
	p.slot.Status, p.slot.State, p.slot.Total = http.StatusOK, ClusterSynced, &total
	p.slot.ResourceVersion = res.Freshness.ResourceVersion
	if res.Freshness.Stale {
		p.slot.State = ClusterStale
	}
	return res, groupBy, nil
}
