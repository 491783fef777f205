package server

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/query"
)

// Lists across clusters (docs/clusters.md): on a fleet's front,
// GET /api/v1/{resource} asks every cluster (or those ?cluster= names)
// its part of the question, authorized there, and merges the parts. Each
// cluster answers its own first offset+limit matches in the question's
// order; a merge of those ordered parts (ties by cluster, then namespace
// and name) makes the page, so no cluster's whole list moves. The
// continue token carries each cluster's own place.

// ClusterSlot says how one cluster took part in an answer across
// clusters: the HTTP status its part answered (200; 403 where the caller
// may not read there; 404 where it serves no such resource; 503 while it
// is not serving) and, for a 200, whether it was synced or stale and how
// many objects it matched.
type ClusterSlot struct {
	Cluster string `json:"cluster"`
	Status  int    `json:"status"`
	// State is synced or stale for a cluster that answered.
	State           string `json:"state,omitempty"`
	Total           *int   `json:"total,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Reason says why a cluster did not answer.
	Reason string `json:"reason,omitempty"`
}

// fleetListParams are the parameters of a list across clusters: a
// single cluster's, watch aside, and cluster.
var fleetListParams = []string{"cluster", "namespace", "labelSelector", "index", "value", "limit", "continue",
	"filter", "sort", "offset", "fields"}

// clusterPart is one cluster's part of a list across clusters.
type clusterPart struct {
	slot   ClusterSlot
	lq     cache.ListQuery
	res    cache.ListResult
	fields *query.Projection
	local  [][]query.Value // each item's values of the cluster's sort
	full   [][]query.Value // and of the question's sort, cluster keys included
	used   int             // items the merge took (or skipped by offset)
}

// fleetQuestion is what a question across clusters reads once, whichever
// cluster answers.
type fleetQuestion struct {
	resource string
	q        url.Values
	now      time.Time
}

// clusterAsk reads the question for the named cluster's server cs: its
// keys as its schema has them, cluster terms decided for name. skip is
// true when no object there can match. A parameter that cannot be read is
// the caller's error (400), whichever cluster finds it.
//
// Every part is a question, a plain list too (no filter, no sort): each
// cluster then walks its ordered index by namespace and name rather than
// sorting its whole list by key.
func (fq *fleetQuestion) clusterAsk(cs *Server, name string, groupBy string) (ask *cache.Ask, sort []query.SortKey, group []query.Key, sc *query.Schema, skip bool, err error) {
	if sc, err = cs.schema(fq.resource); err != nil {
		return nil, nil, nil, nil, false, err
	}
	across := sc.AcrossClusters()
	flt, err := across.ParseFilter(fq.q["filter"], fq.now)
	if err != nil {
		return nil, nil, nil, nil, false, err
	}
	if sort, err = across.ParseSort(fq.q.Get("sort")); err != nil {
		return nil, nil, nil, nil, false, err
	}
	if group, err = across.ParseKeys("groupBy", groupBy, query.MaxGroupBy, false); err != nil {
		return nil, nil, nil, nil, false, err
	}
	local, match := flt.InCluster(name)
	localSort := query.Local(sort)
	// The filter as written, told apart from the same text asked of one
	// cluster, where "cluster" is a path: a kept walk is this cluster's.
	ask = &cache.Ask{Schema: sc, Filter: local, Sort: localSort, SortText: query.SortText(localSort),
		FilterText: strings.Join(fq.q["filter"], "\x00") + "\x00\x00across:" + name, Now: fq.now}
	return ask, sort, group, sc, !match, nil
}

// fleetList answers GET /api/v1/{resource} on a fleet's front.
func (s *Server) fleetList(c echo.Context) error {
	if c.QueryParams().Has("watch") {
		return fmt.Errorf("%w: streams across clusters are not served: subscribe under /clusters/{name}/", errBadRequest)
	}
	q, err := queryParams(c, fleetListParams...)
	if err != nil {
		return err
	}
	resource, err := pathParam(c, "resource")
	if err != nil {
		return err
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	offset := 0
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 || offset > maxOffset {
			return fmt.Errorf("%w: offset must be an integer from 0 to %d, got %q", errBadRequest, maxOffset, v)
		}
	}
	names, err := s.clusterNames(q.Get("cluster"))
	if err != nil {
		return err
	}
	fq := &fleetQuestion{resource: resource, q: q, now: time.Now()}
	tok, err := decodeFleetToken(q.Get("continue"), fq.digest())
	if err != nil {
		return err
	}
	if tok != nil && offset > 0 {
		return fmt.Errorf("%w: offset applies to the first page; a continue token resumes where the last page ended", errBadRequest)
	}
	// The clusters are asked at once: one slow to authorize (its API
	// server hangs) holds the answer up by its own delay only.
	parts := make([]*clusterPart, len(names))
	sorts := make([][]query.SortKey, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { parts[i], sorts[i], errs[i] = s.listPart(c, fq, name, tok, limit, offset) })
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return err
	}
	var sort []query.SortKey
	for _, sk := range sorts {
		if sk != nil {
			sort = sk
		}
	}
	if err := allUnknown(parts, resource); err != nil {
		return err
	}
	page := mergeParts(parts, sort, offset, limit)
	next, remaining := fleetContinue(parts, tok, fq.digest())
	return writeFleetList(c.Response(), resource, parts, page, next, remaining)
}

// listPart asks one cluster for its part: its first offset+limit
// matches, or limit after its place in tok.
func (s *Server) listPart(c echo.Context, fq *fleetQuestion, name string, tok *fleetToken, limit, offset int) (*clusterPart, []query.SortKey, error) {
	p := &clusterPart{slot: ClusterSlot{Cluster: name}}
	place := ""
	if tok != nil {
		st, ok := tok.Clusters[name]
		if !ok { // named by ?cluster= or the fleet's list, not there at the walk's first page
			p.slot.Status = http.StatusServiceUnavailable
			p.slot.Reason = "left out of this walk: it was not in the fleet at its first page"
			return p, nil, nil
		}
		if st.Out != 0 {
			p.slot.Status = st.Out
			if st.Out != http.StatusForbidden {
				p.slot.Reason = "left out of this walk: it did not answer its first page"
			}
			return p, nil, nil
		}
		place = st.Continue
	}
	cs, err := s.cluster(name)
	if err != nil {
		return p.failed(err), nil, nil
	}
	ask, sort, _, sc, skip, err := fq.clusterAsk(cs, name, "")
	if err != nil {
		return p.failed(err), nil, callersError(err)
	}
	if p.fields, err = sc.ParseFields(fq.q.Get("fields"), fq.now); err != nil {
		return p, nil, err
	}
	if skip {
		p.slot.Status, p.slot.State, p.slot.Total = http.StatusOK, ClusterSynced, new(int)
		return p, sort, nil
	}
	n := limit
	if limit > 0 && tok == nil {
		n = offset + limit
	}
	done := tok != nil && tok.Clusters[name].Done
	if done { // asked for its slot only: whether it answers, and how
		n, place = 1, ""
	}
	p.lq = cache.ListQuery{Ask: ask, Namespace: fq.q.Get("namespace"), LabelSelector: fq.q.Get("labelSelector"),
		Index: fq.q.Get("index"), Value: fq.q.Get("value"), Limit: n, Continue: place}
	pctx, cancel := cs.ClusterPartContext(c.Request().Context(), name)
	err = cs.restrictListIn(pctx, c, fq.resource, &p.lq)
	cancel()
	if err != nil {
		return p.failed(err), sort, callersError(err)
	}
	if p.res, err = cs.r.List(fq.resource, p.lq); err != nil {
		return p.failed(err), sort, callersError(err)
	}
	if done {
		p.res.Items, p.res.Values, p.res.Remaining, p.res.Continue = nil, nil, 0, ""
		if n := tok.Clusters[name].Total; n != nil { // the walk's moment's, not the live cache's
			p.res.Total = *n
		}
	}
	total := p.res.Total
	p.slot.Status, p.slot.State, p.slot.Total = http.StatusOK, ClusterSynced, &total
	p.slot.ResourceVersion = p.res.Freshness.ResourceVersion
	if p.res.Freshness.Stale {
		p.slot.State = ClusterStale
	}
	// The cluster's answer holds its items' sort values as it ordered
	// them; reading them again would read each object's JSON.
	p.local = p.res.Values
	if len(p.local) != len(p.res.Items) {
		p.local = make([][]query.Value, len(p.res.Items))
		for i, o := range p.res.Items {
			p.local[i] = ask.SortValues(o)
		}
	}
	p.full = make([][]query.Value, len(p.res.Items))
	for i := range p.res.Items {
		p.full[i] = query.ClusterValues(sort, name, p.local[i])
	}
	return p, sort, nil
}

// firstError is the first of the clusters' errors: each read the same
// parameters, so one says what is wrong.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// failed records why the cluster did not answer.
func (p *clusterPart) failed(err error) *clusterPart {
	st := errorStatus(err)
	p.slot.Status, p.slot.Reason = int(st.Code), st.Message
	if st.Code == http.StatusForbidden {
		p.slot.Reason = "" // says nothing more of what is there
	}
	return p
}

// callersError is err when it is the caller's to fix, whichever cluster
// found it (a parameter that cannot be read, a continue token expired):
// the whole answer is that error, not one cluster's slot.
func callersError(err error) error {
	switch errorStatus(err).Code {
	case http.StatusBadRequest, http.StatusGone:
		return err
	}
	return nil
}

// allUnknown is a 404 when no cluster serving serves the resource, as a
// single cluster's list of an unknown resource is.
func allUnknown(parts []*clusterPart, resource string) error {
	unknown := false
	for _, p := range parts {
		switch p.slot.Status {
		case http.StatusNotFound:
			unknown = true
		case http.StatusServiceUnavailable:
		default:
			return nil
		}
	}
	if !unknown {
		return nil
	}
	return fmt.Errorf("%w: no cluster serves %q (the fleet's own routes are listed in /openapi.json; each cluster's are under /clusters/{name}/)",
		cache.ErrUnknownResource, resource)
}

// mergedItem is an item of a merged page and the cluster it came from.
type mergedItem struct {
	part *clusterPart
	o    *cache.Object
}

// mergeParts merges the parts' ordered items: by the sort's values (none
// for a plain list), then the cluster, then namespace and name. It skips
// offset items, takes limit (0: all), and notes in each part how many of
// its items were used.
func mergeParts(parts []*clusterPart, sort []query.SortKey, offset, limit int) []mergedItem {
	less := func(a, b *clusterPart) bool {
		x, y := a.res.Items[a.used], b.res.Items[b.used]
		if c := query.CompareSorted(sort, a.full[a.used], b.full[b.used], "", "", "", ""); c != 0 {
			return c < 0
		}
		if c := strings.Compare(a.slot.Cluster, b.slot.Cluster); c != 0 {
			return c < 0
		}
		return query.CompareSorted(nil, nil, nil, x.Namespace(), x.Name(), y.Namespace(), y.Name()) < 0
	}
	var page []mergedItem
	for limit == 0 || len(page) < limit {
		var min *clusterPart
		for _, p := range parts {
			if p.used < len(p.res.Items) && (min == nil || less(p, min)) {
				min = p
			}
		}
		if min == nil {
			break
		}
		if offset > 0 {
			offset--
		} else {
			page = append(page, mergedItem{min, min.res.Items[min.used]})
		}
		min.used++
	}
	return page
}

// fleetToken is a continue token across clusters: the question it
// belongs to and each cluster's place. A cluster not in Clusters did not
// answer the first page and is left out of the walk.
type fleetToken struct {
	Question string                  `json:"q"`
	Clusters map[string]clusterPlace `json:"c"`
}

// clusterPlace is one cluster's place in a walk: its own continue token
// ("" before its first item), or Done when it has nothing more, with
// Total, its matches as its last page counted them (its walk's moment's:
// a later page shows that total, not the live cache's), or Out, the
// status it answered the first page with when it did not answer it.
type clusterPlace struct {
	Continue string `json:"t,omitempty"`
	Done     bool   `json:"d,omitempty"`
	Total    *int   `json:"n,omitempty"`
	Out      int    `json:"o,omitempty"`
}

// digest names the question a continue token belongs to: its resource,
// clusters, selection, filter and sort.
func (fq *fleetQuestion) digest() string {
	h := sha256.New()
	for _, v := range []string{fq.resource, fq.q.Get("cluster"), fq.q.Get("namespace"), fq.q.Get("labelSelector"),
		fq.q.Get("index"), fq.q.Get("value"), strings.Join(fq.q["filter"], "\x00"), fq.q.Get("sort")} {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func decodeFleetToken(s, question string) (*fleetToken, error) {
	if s == "" {
		return nil, nil
	}
	var t fleetToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Clusters == nil || !t.wellFormed() {
		return nil, fmt.Errorf("%w: continue token is malformed; start the list again without it", errBadRequest)
	}
	if t.Question != question {
		return nil, fmt.Errorf("%w: continue token belongs to another question (its resource, clusters, selection, filter or sort); start the list again without it", errBadRequest)
	}
	return &t, nil
}

// wellFormed reports whether every place is one fleetContinue makes:
// a continue token, done (with its total), or left out with a status.
func (t *fleetToken) wellFormed() bool {
	for _, st := range t.Clusters {
		switch {
		case st.Out != 0 && (st.Out < 400 || st.Out > 599 || st.Done || st.Continue != "" || st.Total != nil),
			st.Done && (st.Continue != "" || st.Total != nil && *st.Total < 0),
			!st.Done && st.Total != nil:
			return false
		}
	}
	return true
}

// fleetContinue is the token of the next page, "" when no cluster has
// more, and how many matches follow the page.
func fleetContinue(parts []*clusterPart, prev *fleetToken, question string) (string, int) {
	t := fleetToken{Question: question, Clusters: map[string]clusterPlace{}}
	more, remaining := false, 0
	for _, p := range parts {
		name := p.slot.Cluster
		if p.slot.Status != http.StatusOK {
			st := clusterPlace{Out: p.slot.Status}
			if prev != nil { // keeps its place, to resume when it answers again
				var ok bool
				if st, ok = prev.Clusters[name]; !ok {
					continue // not in the walk
				}
			}
			t.Clusters[name] = st
			more = more || (st.Out == 0 && !st.Done)
			continue
		}
		left := len(p.res.Items) - p.used + p.res.Remaining
		remaining += left
		switch {
		case left == 0:
			t.Clusters[name] = clusterPlace{Done: true, Total: &p.res.Total}
			continue
		case p.used == 0 && prev != nil:
			t.Clusters[name] = prev.Clusters[name]
		case p.used == 0: // the place before its first match, in the walk of this moment
			t.Clusters[name] = clusterPlace{Continue: p.res.ContinueAfter(p.lq, 0, nil)}
		default:
			t.Clusters[name] = clusterPlace{Continue: p.res.ContinueAfter(p.lq, p.used, p.local[p.used-1])}
		}
		more = true
	}
	if !more {
		return "", 0
	}
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b), remaining
}

// fleetMeta is a list's metadata across clusters: no resourceVersion,
// each cluster's is in its slot.
type fleetMeta struct {
	Continue  string `json:"continue,omitempty"`
	Remaining int    `json:"remainingItemCount,omitempty"`
	Total     int    `json:"totalItemCount"`
}

// writeFleetList writes a list across clusters: each item beside the
// name of its cluster, {"cluster":…,"object":…}, never inside the object.
func writeFleetList(w *echo.Response, resource string, parts []*clusterPart, page []mergedItem, next string, remaining int) error {
	total := 0
	slots := make([]ClusterSlot, len(parts))
	for i, p := range parts {
		slots[i] = p.slot
		if p.slot.Total != nil {
			total += *p.slot.Total
		}
	}
	head, err := json.Marshal(struct {
		Kind     string        `json:"kind"`
		Resource string        `json:"resource"`
		Metadata fleetMeta     `json:"metadata"`
		Clusters []ClusterSlot `json:"clusters"`
	}{"FleetList", resource, fleetMeta{Continue: next, Remaining: remaining, Total: total}, slots})
	if err != nil {
		return err
	}
	w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, envelopeFit)
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"items":[`)
	var scratch []byte
	for i, it := range page {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString(`{"cluster":`)
		scratch = strconv.AppendQuote(scratch[:0], it.part.slot.Cluster) // a DNS label: no escapes
		bw.Write(scratch)
		bw.WriteString(`,"object":`)
		if it.part.fields != nil {
			scratch = it.part.fields.Apply(scratch[:0], it.o.Raw())
			bw.Write(scratch)
		} else {
			it.o.WriteTo(bw) // in its pieces: a chunked object is not joined
		}
		bw.WriteByte('}')
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}
