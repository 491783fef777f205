package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/ipowner"
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
func parseBatch(body []byte, buf []batchQuery) ([]batchQuery, error) {
	queries, ok := scanBatchInto(body, buf)
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
func (q batchQuery) toIPQuery() (ipowner.Query, error) {
	if len(q.At) == 0 && len(q.Port) == 0 && q.Protocol == "" && q.IP != "" {
		return ipowner.Query{IP: q.IP}, nil // the common query: an address alone
	}
	at, ok := scalar(q.At)
	if !ok {
		return ipowner.Query{}, fmt.Errorf("%w: at must be a string or a number", errBadRequest)
	}
	port, ok := scalar(q.Port)
	if !ok {
		return ipowner.Query{}, fmt.Errorf("%w: port must be a number", errBadRequest)
	}
	if q.IP == "" {
		return ipowner.Query{}, fmt.Errorf("%w: ip is required", errBadRequest)
	}
	return parseIPQuery(q.IP, at, port, q.Protocol)
}

// lookupIPBatch answers a batch in order, as one JSON document, or as
// NDJSON (one answer a line) when the client accepts application/x-ndjson.
func (s *Server) lookupIPBatch(c echo.Context) error {
	// A page of another site may post text/plain or a form without a
	// preflight: it is refused before anything is read or computed.
	if err := s.checkOrigin(c.Request()); err != nil {
		return err
	}
	if _, err := queryParams(c); err != nil {
		return err
	}
	bodyBuf := batchBodies.Get().(*bytes.Buffer)
	defer func() {
		if bodyBuf.Cap() <= maxBatchBody+bytes.MinRead {
			bodyBuf.Reset()
			batchBodies.Put(bodyBuf) // after the queries, which point into it, are cleared (defers run last first)
		}
	}()
	body, err := readBatchBody(c, bodyBuf)
	if err != nil {
		return err
	}
	pooled := batchQueries.Get().(*[]batchQuery)
	queries, err := parseBatch(body, *pooled)
	defer func() { // the pool keeps no strings of this body
		if queries == nil { // refused: what was read into the pooled slice is not known
			clear((*pooled)[:cap(*pooled)])
		}
		clear(queries)
		if queries != nil && cap(queries) <= maxBatchQueries+1 {
			*pooled = queries[:0]
		}
		batchQueries.Put(pooled)
	}()
	if err != nil {
		return err
	}
	visible, err := s.accessFor(c).ipVisibility() // one decision for every slot
	if err != nil {
		return err
	}
	ndjson := strings.Contains(c.Request().Header.Get("Accept"), "application/x-ndjson")
	lookups := s.r.AddressLookups()
	out := newBatchOut(c.Response(), ndjson, len(queries))
	defer out.release()
	if !ndjson {
		out.b = append(out.b, `{"kind":"IPLookupBatch","apiVersion":"kubeindex/v1","results":[`...)
	}
	var res cache.IPLookup
	for i, q := range queries {
		if !ndjson && i > 0 {
			out.b = append(out.b, ',')
		}
		out.b = s.answerOne(out.b, lookups, visible, q, &res)
		if ndjson {
			out.b = append(out.b, '\n')
		}
		if err := out.flushIfLong(); err != nil {
			return err
		}
	}
	if !ndjson {
		out.b = append(out.b, "]}\n"...)
	}
	return out.finish()
}

// A batch's answer is made in a pooled buffer and, unless it is long,
// written at once with its length: one write, no chunked encoding. An
// answer about a pod's address is about 250 bytes.
const (
	batchAnswerSize = 256
	// batchFlushAt: a longer answer (thousands of queries, or addresses
	// many hostNetwork pods share) is written in parts of about this size.
	batchFlushAt = 1 << 20
	// maxPooledBatchAnswer: a larger buffer is left to the collector.
	maxPooledBatchAnswer = 2 << 20
)

var batchBuffers = sync.Pool{New: func() any { return new([]byte) }}

// batchOut is the answer of a batch on its way out: b is appended to,
// then written whole by finish, or in parts when it grows long.
type batchOut struct {
	w       http.ResponseWriter
	ndjson  bool
	started bool // the status is written
	pooled  *[]byte
	b       []byte
}

func newBatchOut(w http.ResponseWriter, ndjson bool, queries int) *batchOut {
	pooled := batchBuffers.Get().(*[]byte)
	b := slices.Grow((*pooled)[:0], min(batchAnswerSize*queries+64, batchFlushAt+batchAnswerSize))
	return &batchOut{w: w, ndjson: ndjson, pooled: pooled, b: b}
}

// start writes the status and headers; length < 0: unknown (chunked).
func (o *batchOut) start(length int) {
	if o.ndjson {
		o.w.Header().Set("Content-Type", "application/x-ndjson")
	} else {
		o.w.Header()["Content-Type"] = jsonContentType
	}
	if length >= 0 {
		o.w.Header().Set("Content-Length", strconv.Itoa(length))
	}
	o.w.WriteHeader(http.StatusOK)
	o.started = true
}

// flushIfLong writes what is made once it is long, so that the memory a
// batch holds stays bounded.
func (o *batchOut) flushIfLong() error {
	if len(o.b) < batchFlushAt {
		return nil
	}
	if !o.started {
		o.start(-1)
	}
	_, err := o.w.Write(o.b)
	o.b = o.b[:0]
	return err
}

// finish writes the rest: the whole answer, with its length, when nothing
// was written before.
func (o *batchOut) finish() error {
	if !o.started {
		o.start(len(o.b))
	}
	_, err := o.w.Write(o.b)
	return err
}

// release gives the buffer back to the pool unless it grew large.
func (o *batchOut) release() {
	if cap(o.b) <= maxPooledBatchAnswer {
		*o.pooled = o.b[:0]
		batchBuffers.Put(o.pooled)
	}
}

// batchQueries are the slices a batch's queries are read into.
var batchQueries = sync.Pool{New: func() any { return new([]batchQuery) }}

// batchBodies are the buffers batch bodies are read into.
var batchBodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBatchBody reads a batch body of at most maxBatchBody bytes into buf,
// grown once when the request says its length.
func readBatchBody(c echo.Context, buf *bytes.Buffer) ([]byte, error) {
	if n := c.Request().ContentLength; n > 0 && n <= maxBatchBody {
		buf.Grow(int(n) + bytes.MinRead) // room for ReadFrom to see the end without growing
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(c.Response(), c.Request().Body, maxBatchBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("a batch body is at most %d bytes", maxBatchBody))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", errBadRequest, err)
	}
	return buf.Bytes(), nil
}

// answerOne appends one query's answer: the lookup's summary (no objects),
// or {"ip":…,"error":Status}. res is where the lookup answers, reused from
// one query to the next.
func (s *Server) answerOne(b []byte, lookups *cache.AddressLookups, visible func(ipowner.Kind, string) bool, bq batchQuery, res *cache.IPLookup) []byte {
	if err := s.lookupOne(lookups, visible, bq, res); err != nil {
		st := errorStatus(err)
		if st.Code == http.StatusInternalServerError {
			s.log.Error("batch IP lookup", "err", err)
		}
		b = append(b, `{"ip":`...)
		b = jsonscan.AppendString(b, text.Truncate(bq.IP, 64))
		b = append(b, `,"error":{"code":`...)
		b = strconv.AppendInt(b, int64(st.Code), 10)
		b = append(b, `,"reason":`...)
		b = jsonscan.AppendString(b, string(st.Reason))
		b = append(b, `,"message":`...)
		b = jsonscan.AppendString(b, st.Message)
		return append(b, "}}"...)
	}
	if res.History != nil {
		return appendIPHistoryBody(append(b, '{'), *res)
	}
	return append(appendIPSummary(append(b, '{'), res, false), '}')
}

func (s *Server) lookupOne(lookups *cache.AddressLookups, visible func(ipowner.Kind, string) bool, bq batchQuery, res *cache.IPLookup) error {
	q, err := bq.toIPQuery()
	if err != nil {
		return err
	}
	q.Visible = visible
	return lookups.LookupInto(q, res)
}
