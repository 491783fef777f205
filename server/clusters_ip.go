package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/internal/text"
)

// ClusterIPAnswer is one cluster's slot in an answer across clusters: the
// cluster's name beside its own answer, never inside it, so no field of
// an object can be mistaken for it.
type ClusterIPAnswer struct {
	Cluster string `json:"cluster"`
	// Status is the HTTP status the cluster's own lookup answered: 200
	// (held), 404 (nobody holds it there), 403 (the caller may not read
	// there), 503 (the cluster is not serving), ...
	Status int `json:"status"`
	// Answer is the cluster's answer as GET /clusters/{name}/api/v1/ip/{ip}
	// gives it: an IP lookup, or a Status.
	Answer json.RawMessage `json:"answer"`
}

// clusterIP answers GET /api/v1/clusters/ip/{ip}: the lookup asked of
// every cluster (or those ?cluster= names), each answering as its own
// /api/v1/ip/{ip} does, authorized there, so that an address held in two
// clusters (overlapping pod CIDRs) is answered by both, and a caller sees
// only what each cluster lets it read.
func (s *Server) clusterIP(c echo.Context) error {
	q, err := queryParams(c, append([]string{"cluster"}, ipQueryParams...)...)
	if err != nil {
		return err
	}
	ip, err := pathParam(c, "ip")
	if err != nil {
		return err
	}
	if _, err := netip.ParseAddr(ip); err != nil {
		return fmt.Errorf("%w: %q is not an IP address", errBadRequest, text.Truncate(ip, 64))
	}
	names, err := s.clusterNames(q.Get("cluster"))
	if err != nil {
		return err
	}
	sub := url.Values{}
	for _, k := range ipQueryParams {
		if v := q.Get(k); v != "" {
			sub.Set(k, v)
		}
	}
	body := struct {
		Kind     string            `json:"kind"`
		IP       string            `json:"ip"`
		HeldIn   []string          `json:"heldIn"`
		Clusters []ClusterIPAnswer `json:"clusters"`
	}{Kind: "ClusterIPLookup", IP: ip, HeldIn: []string{}}
	// At once, as a list's parts: one slow to authorize holds the answer
	// up by its own bounded delay only.
	body.Clusters = make([]ClusterIPAnswer, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			body.Clusters[i] = s.askCluster(c.Request(), name, "/api/v1/ip/"+url.PathEscape(ip), sub.Encode())
		})
	}
	wg.Wait()
	for _, a := range body.Clusters {
		if a.Status == http.StatusOK {
			body.HeldIn = append(body.HeldIn, a.Cluster)
		}
	}
	return c.JSON(http.StatusOK, body)
}

// clusterNames are the clusters ?cluster= names (comma-separated), each
// known, or every cluster in configuration order.
func (s *Server) clusterNames(param string) ([]string, error) {
	var all []string
	if s.opts.Clusters != nil {
		all = s.opts.Clusters.Names()
	} else {
		all = []string{s.opts.ClusterName}
	}
	if param == "" {
		return all, nil
	}
	var out []string
	for _, n := range strings.Split(param, ",") {
		if !slices.Contains(all, n) {
			return nil, fmt.Errorf("%w: cluster=%q: no such cluster (clusters: %s)", errBadRequest, text.Truncate(n, 64), strings.Join(all, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// askCluster asks the named cluster's server for path?rawQuery as the
// caller: the same credentials, address and Host, so the cluster's server
// authenticates and authorizes it as if asked under its prefix. The
// answer is recorded, not written: the connection is the front's.
func (s *Server) askCluster(r *http.Request, name, path, rawQuery string) ClusterIPAnswer {
	return s.askClusterWith(r, name, http.MethodGet, path, rawQuery, nil)
}

// askClusterWith is askCluster with a method and a body.
func (s *Server) askClusterWith(r *http.Request, name, method, path, rawQuery string, body []byte) ClusterIPAnswer {
	target, err := s.cluster(name)
	if err != nil {
		st := errorStatus(err)
		b, _ := json.Marshal(st)
		return ClusterIPAnswer{Cluster: name, Status: int(st.Code), Answer: b}
	}
	// Without the connection: holding and releasing its writes is the
	// front's request's to do.
	ctx, cancel := target.ClusterPartContext(r.Context(), name)
	defer cancel()
	ctx = context.WithValue(ctx, connKey{}, (*limitedConn)(nil))
	sub := r.Clone(ctx)
	sub.URL = &url.URL{Path: path, RawQuery: rawQuery}
	sub.RequestURI = sub.URL.RequestURI()
	sub.Method, sub.Body, sub.ContentLength = method, http.NoBody, 0
	if body != nil {
		sub.Body, sub.ContentLength = bodyReader(body), int64(len(body))
	}
	rec := &recorder{header: http.Header{}}
	target.echo.ServeHTTP(rec, sub)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	answer := rec.body.Bytes()
	if !json.Valid(answer) {
		answer, _ = json.Marshal(errorStatus(fmt.Errorf("cluster %q answered no JSON", name)))
	}
	return ClusterIPAnswer{Cluster: name, Status: rec.status, Answer: answer}
}

// recorder keeps an answer in memory.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
