package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/internal/text"
)

// Batches of IP lookups across clusters (POST /api/v1/clusters/ip:lookup):
// each query names its cluster, or none to ask every cluster. The queries
// of one cluster go to its own batch route in one request, as the caller,
// authorized there; each query's answer is its clusters' slots, as GET
// /api/v1/clusters/ip/{ip} gives them for one address.

// clusterBatchQuery is one query of a batch across clusters: a batch
// query and the cluster it is asked of.
type clusterBatchQuery struct {
	Cluster  string          `json:"cluster,omitempty"`
	IP       string          `json:"ip"`
	At       json.RawMessage `json:"at,omitempty"`
	Port     json.RawMessage `json:"port,omitempty"`
	Protocol string          `json:"protocol,omitempty"`
}

// ClusterBatchResult is one query's answer across clusters: the address,
// the clusters whose answer holds it, and each cluster's own answer.
type ClusterBatchResult struct {
	IP     string   `json:"ip"`
	HeldIn []string `json:"heldIn"`
	// Clusters' answers are each a slot of its cluster's own batch: a
	// summary, or {"ip":…,"error":…}; Status is 200 for a summary, the
	// error's code otherwise.
	Clusters []ClusterIPAnswer `json:"clusters"`
}

// clusterIPBatch answers a batch across clusters, in the order asked.
func (s *Server) clusterIPBatch(c echo.Context) error {
	if err := s.checkOrigin(c.Request()); err != nil {
		return err
	}
	if _, err := queryParams(c); err != nil {
		return err
	}
	var buf bytes.Buffer
	body, err := readBatchBody(c, &buf)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req struct {
		Queries []clusterBatchQuery `json:"queries"`
	}
	if err := dec.Decode(&req); err != nil || dec.More() {
		msg := "data after the batch object"
		if err != nil {
			msg = text.Truncate(err.Error(), 200)
		}
		return fmt.Errorf("%w: the body must be {\"queries\":[{\"cluster\":…,\"ip\":…,\"at\":…,\"port\":…,\"protocol\":…},…]}: %s", errBadRequest, msg)
	}
	if len(req.Queries) > maxBatchQueries {
		return fmt.Errorf("%w: %d queries; a batch holds at most %d", errBadRequest, len(req.Queries), maxBatchQueries)
	}
	all, err := s.clusterNames("")
	if err != nil {
		return err
	}
	// Each cluster's queries, in order, and where each answer goes.
	asked := map[string][]int{}
	for i, q := range req.Queries {
		names := all
		if q.Cluster != "" {
			if names, err = s.clusterNames(q.Cluster); err != nil || len(names) != 1 {
				return fmt.Errorf("%w: queries[%d].cluster %q: no such cluster (clusters: %v)", errBadRequest, i, text.Truncate(q.Cluster, 64), all)
			}
		}
		for _, n := range names {
			asked[n] = append(asked[n], i)
		}
	}
	results := make([]ClusterBatchResult, len(req.Queries))
	for i, q := range req.Queries {
		results[i] = ClusterBatchResult{IP: q.IP, HeldIn: []string{}, Clusters: []ClusterIPAnswer{}}
	}
	// The clusters are asked at once, as a list's parts.
	answersOf := make([][]ClusterIPAnswer, len(all))
	var wg sync.WaitGroup
	for k, name := range all {
		if idx := asked[name]; len(idx) > 0 {
			wg.Go(func() { answersOf[k] = s.askClusterBatch(c.Request(), name, req.Queries, idx) })
		}
	}
	wg.Wait()
	for k, name := range all { // in configuration order, so each query's slots are
		idx := asked[name]
		if len(idx) == 0 {
			continue
		}
		answers := answersOf[k]
		for j, i := range idx {
			a := answers[j]
			if a.Status == http.StatusOK {
				results[i].HeldIn = append(results[i].HeldIn, name)
			}
			results[i].Clusters = append(results[i].Clusters, a)
		}
	}
	return c.JSON(http.StatusOK, struct {
		Kind       string               `json:"kind"`
		APIVersion string               `json:"apiVersion"`
		Results    []ClusterBatchResult `json:"results"`
	}{"ClusterIPLookupBatch", "kubeindex/v1", results})
}

// askClusterBatch asks the named cluster the queries at idx in one batch,
// as the caller, and returns their answers in that order: each the
// cluster's slot, or the whole batch's refusal (403, 503) in every slot.
func (s *Server) askClusterBatch(r *http.Request, name string, queries []clusterBatchQuery, idx []int) []ClusterIPAnswer {
	sub := make([]batchQuery, len(idx))
	for j, i := range idx {
		q := queries[i]
		sub[j] = batchQuery{IP: q.IP, At: q.At, Port: q.Port, Protocol: q.Protocol}
	}
	body, _ := json.Marshal(batchRequest{Queries: sub})
	out := make([]ClusterIPAnswer, len(idx))
	whole := s.askClusterWith(r, name, http.MethodPost, "/api/v1/ip:lookup", "", body)
	var batch struct {
		Results []json.RawMessage `json:"results"`
	}
	if whole.Status != http.StatusOK || json.Unmarshal(whole.Answer, &batch) != nil || len(batch.Results) != len(idx) {
		if whole.Status == http.StatusOK { // an answer not of the batch's shape
			whole.Status, whole.Answer = http.StatusInternalServerError, statusJSON(fmt.Errorf("cluster %q answered the batch in another shape", name))
		}
		for j := range out {
			out[j] = whole
		}
		return out
	}
	for j, raw := range batch.Results {
		var slot struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		json.Unmarshal(raw, &slot)
		st := http.StatusOK
		if slot.Error != nil {
			st = slot.Error.Code
		}
		out[j] = ClusterIPAnswer{Cluster: name, Status: st, Answer: raw}
	}
	return out
}

// statusJSON is err's Status as JSON.
func statusJSON(err error) json.RawMessage {
	b, _ := json.Marshal(errorStatus(err))
	return b
}

// bodyReader is a request body of bytes held in memory.
func bodyReader(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }
