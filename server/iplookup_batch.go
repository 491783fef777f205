package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/internal/text"
)

// Batches of IP lookups (POST /api/v1/ip:lookup): read-only despite the
// verb, as a SubjectAccessReview is. The body is bounded; each query is
// answered in its slot, a bad one with an error there, not a failed batch.
const (
	maxBatchQueries = 10_000
	// maxBatchBody is room for maxBatchQueries queries of about 200 bytes.
	maxBatchBody = 2 << 20
)

// batchQuery is one query of a batch. At and Port may be JSON strings or
// numbers.
type batchQuery struct {
	IP       string          `json:"ip"`
	At       json.RawMessage `json:"at,omitempty"`
	Port     json.RawMessage `json:"port,omitempty"`
	Protocol string          `json:"protocol,omitempty"`
}

// batchRequest is the body of a batch.
type batchRequest struct {
	Queries []batchQuery `json:"queries"`
}

// parseBatch reads a batch body: {"queries":[...]} with at most
// maxBatchQueries queries and no unknown fields.
func parseBatch(body []byte) ([]batchQuery, error) {
	queries, ok := scanBatch(body)
	if !ok {
		var err error
		if queries, err = decodeBatch(body); err != nil {
			return nil, err
		}
	}
	if len(queries) > maxBatchQueries {
		return nil, fmt.Errorf("%w: %d queries; a batch holds at most %d", errBadRequest, len(queries), maxBatchQueries)
	}
	return queries, nil
}

// decodeBatch is parseBatch with encoding/json, for any spelling.
func decodeBatch(body []byte) ([]batchQuery, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req batchRequest
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("%w: the body must be {\"queries\":[{\"ip\":…,\"at\":…,\"port\":…,\"protocol\":…},…]}: %s",
			errBadRequest, text.Truncate(err.Error(), 200))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the batch object", errBadRequest)
	}
	return req.Queries, nil
}

// scalar is a JSON string's content or a number's text; ok is false for
// anything else.
func scalar(v json.RawMessage) (string, bool) {
	if len(v) == 0 || string(v) == "null" {
		return "", true
	}
	if v[0] == '"' {
		var s string
		err := json.Unmarshal(v, &s)
		return s, err == nil && s != ""
	}
	if _, err := strconv.ParseFloat(string(v), 64); err == nil && !strings.ContainsAny(string(v), "eE") {
		return string(v), true
	}
	return "", false
}

// toIPQuery checks one query of a batch as the GET route checks its
// parameters.
func (q batchQuery) toIPQuery() (cache.IPQuery, error) {
	at, ok := scalar(q.At)
	if !ok {
		return cache.IPQuery{}, fmt.Errorf("%w: at must be a string or a number", errBadRequest)
	}
	port, ok := scalar(q.Port)
	if !ok {
		return cache.IPQuery{}, fmt.Errorf("%w: port must be a number", errBadRequest)
	}
	if q.IP == "" {
		return cache.IPQuery{}, fmt.Errorf("%w: ip is required", errBadRequest)
	}
	return parseIPQuery(q.IP, at, port, q.Protocol)
}

// lookupIPBatch answers a batch in order, as one JSON document, or as
// NDJSON (one answer a line) when the client accepts application/x-ndjson.
func (s *Server) lookupIPBatch(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxBatchBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("a batch body is at most %d bytes", maxBatchBody))
	}
	if err != nil {
		return fmt.Errorf("%w: reading the body: %v", errBadRequest, err)
	}
	queries, err := parseBatch(body)
	if err != nil {
		return err
	}
	visible, err := s.accessFor(c).ipVisibility() // one decision for every slot
	if err != nil {
		return err
	}
	ndjson := strings.Contains(c.Request().Header.Get("Accept"), "application/x-ndjson")
	lookups := s.r.AddressLookups()
	w := c.Response()
	if ndjson {
		w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		w.Header()["Content-Type"] = jsonContentType
	}
	w.WriteHeader(http.StatusOK)
	bw := envelopeBuffers.Get().(*bufio.Writer)
	defer envelopeBuffers.Put(bw)
	bw.Reset(w)
	defer bw.Reset(nil) // the pool keeps no response writer
	if !ndjson {
		bw.WriteString(`{"kind":"IPLookupBatch","apiVersion":"kubeindex/v1","results":[`)
	}
	for i, q := range queries {
		// Each answer is appended in the writer's own buffer: no copy
		// unless it does not fit.
		b := bw.AvailableBuffer()
		if !ndjson && i > 0 {
			b = append(b, ',')
		}
		b = s.answerOne(b, lookups, visible, q)
		if ndjson {
			b = append(b, '\n')
		}
		bw.Write(b)
	}
	if !ndjson {
		bw.WriteString("]}\n")
	}
	return bw.Flush()
}

// answerOne appends one query's answer: the lookup's summary (no objects),
// or {"ip":…,"error":Status}.
func (s *Server) answerOne(b []byte, lookups *cache.AddressLookups, visible func(cache.Resource, string) bool, bq batchQuery) []byte {
	res, err := s.lookupOne(lookups, visible, bq)
	if err != nil {
		st := errorStatus(err)
		if st.Code == http.StatusInternalServerError {
			s.log.Error("batch IP lookup", "err", err)
		}
		b = append(b, `{"ip":`...)
		b = jsonscan.AppendString(b, text.Truncate(bq.IP, 64))
		b = append(b, `,"error":{"code":`...)
		b = strconv.AppendInt(b, int64(st.Code), 10)
		b = append(b, `,"reason":`...)
		b = jsonscan.AppendString(b, st.Reason)
		b = append(b, `,"message":`...)
		b = jsonscan.AppendString(b, st.Message)
		return append(b, "}}"...)
	}
	if res.History != nil {
		return appendIPHistoryBody(append(b, '{'), res)
	}
	return append(appendIPSummary(append(b, '{'), res, false), '}')
}

func (s *Server) lookupOne(lookups *cache.AddressLookups, visible func(cache.Resource, string) bool, bq batchQuery) (cache.IPLookup, error) {
	q, err := bq.toIPQuery()
	if err != nil {
		return cache.IPLookup{}, err
	}
	q.Visible = visible
	return lookups.Lookup(q)
}
