package server

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/query"
)

// Questions on the REST API (package query): filter, sort, offset and
// fields on a list, and counts grouped by keys.

// maxOffset bounds offset as limit is bounded.
const maxOffset = 10_000_000

// convertor is the Table a resource's columns are read from: the API
// server's printer for a built-in kind; for a custom resource its CRD's
// printer columns (from the cached or followed CRD), or Name and Age when
// kubeindex may not read the CRD; the default table otherwise.
func (s *Server) convertor(res cache.Resource) table.Convertor {
	gr := schema.GroupResource{Group: res.Group, Resource: res.Plural}
	if !table.HasPrinter(gr) && res.Group != "" {
		crd, state, err := s.r.CRD(res.Name)
		if err == nil && crd != nil {
			if conv, err := table.ForCRD(crd, res.Version); err == nil {
				return conv
			}
		}
		if err == nil && state != cache.CRDNone {
			return table.ForUnreadCRD()
		}
	}
	return table.ForResource(gr)
}

// schema is the keys a question about resource may name.
func (s *Server) schema(resource string) (*query.Schema, error) {
	res, err := s.r.Resolve(resource)
	if err != nil {
		return nil, err
	}
	return query.NewSchema(s.convertor(res)), nil
}

// asks reports whether q asks a question of a list (filter, sort or
// offset): a plain list pays for no schema.
func asks(q url.Values) bool {
	return q.Has("filter") || q.Has("sort") || q.Has("offset")
}

// parseAsk reads filter, sort and offset into an Ask over sc's keys.
func parseAsk(q url.Values, sc *query.Schema) (*cache.Ask, error) {
	now := time.Now()
	a := &cache.Ask{Schema: sc, SortText: q.Get("sort"), FilterText: strings.Join(q["filter"], "\x00"), Now: now}
	var err error
	if a.Filter, err = sc.ParseFilter(q["filter"], now); err != nil {
		return nil, err
	}
	if a.Sort, err = sc.ParseSort(a.SortText); err != nil {
		return nil, err
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxOffset {
			return nil, fmt.Errorf("%w: offset must be an integer from 0 to %d, got %q", errBadRequest, maxOffset, v)
		}
		a.Offset = n
	}
	return a, nil
}

// writeProjected writes a list whose items keep only the fields asked.
func writeProjected(w http.ResponseWriter, res cache.ListResult, p *query.Projection) error {
	return writeListAs(w, nil, res, &projected{p: p}) // encoded items: nothing to lend
}

// projected is the itemEncoding of a projection. Its size projects into a
// scratch buffer: a page is short, and a known length is one write.
type projected struct {
	p       *query.Projection
	scratch []byte
}

func (e *projected) size(o *cache.Object) int {
	e.scratch = e.p.Apply(e.scratch[:0], o.Raw())
	return len(e.scratch)
}

func (e *projected) write(bw *bufio.Writer, o *cache.Object) {
	e.scratch = e.p.Apply(e.scratch[:0], o.Raw())
	bw.Write(e.scratch)
}

// CountsResponse is the body of GET /api/v1/resources/{r}/counts.
type CountsResponse struct {
	Kind     string       `json:"kind"`
	Resource string       `json:"resource"`
	Metadata ListMeta     `json:"metadata"`
	Total    int          `json:"total"`
	GroupBy  []string     `json:"groupBy"`
	Groups   []CountGroup `json:"groups"`
}

// CountGroup is one group's values (one per groupBy key; null where the
// objects have none) and its count.
type CountGroup struct {
	Values []query.Value `json:"values"`
	Count  int           `json:"count"`
}

// counts answers how many objects a selection and filter match, grouped
// by up to two keys, without rows.
func (s *Server) counts(c echo.Context) error {
	q, err := queryParams(c, "namespace", "labelSelector", "index", "value", "filter", "groupBy")
	if err != nil {
		return err
	}
	resource, err := pathParam(c, "resource")
	if err != nil {
		return err
	}
	sc, err := s.schema(resource)
	if err != nil {
		return err
	}
	ask, err := parseAsk(q, sc)
	if err != nil {
		return err
	}
	groupBy, err := sc.ParseKeys("groupBy", q.Get("groupBy"), query.MaxGroupBy, false)
	if err != nil {
		return err
	}
	lq := cache.ListQuery{Namespace: q.Get("namespace"), LabelSelector: q.Get("labelSelector"),
		Index: q.Get("index"), Value: q.Get("value"), Ask: ask}
	if err := s.restrictList(c, resource, &lq); err != nil {
		return err
	}
	res, err := s.r.Count(resource, lq, groupBy)
	s.setResourceFreshness(c, resource, res.Freshness)
	if err != nil {
		return err
	}
	body := CountsResponse{Kind: "Counts", Resource: res.Resource.Name,
		Metadata: ListMeta{ResourceVersion: res.Freshness.ResourceVersion},
		Total:    res.Total, GroupBy: []string{}, Groups: make([]CountGroup, 0, len(res.Groups))}
	for _, k := range groupBy {
		body.GroupBy = append(body.GroupBy, k.String())
	}
	if len(groupBy) > 0 {
		for _, g := range res.Groups {
			body.Groups = append(body.Groups, CountGroup{Values: g.Values, Count: g.Count})
		}
	}
	return c.JSON(http.StatusOK, body)
}
