package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// batch sends body to the batch handler (not through the route table's
// middleware) and returns the response.
func batch(t testing.TB, s *Server, body, accept string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/ip:lookup", strings.NewReader(body))
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	c := s.echo.NewContext(req, rec)
	if err := s.lookupIPBatch(c); err != nil {
		s.echo.HTTPErrorHandler(err, c)
	}
	return rec
}

// TestIPBatch: answers come in order, one per query, each what the single
// lookup answers; a bad query is an error in its slot; NDJSON on request.
func TestIPBatch(t *testing.T) {
	f, _ := startServer(t)
	s := New(f.Cache, Options{Logger: quiet()})
	body := `{"queries":[{"ip":"10.0.0.12"},{"ip":"not-an-ip"},{"ip":"10.96.0.1"},{"ip":"10.0.0.12","port":9100},` +
		`{"ip":"10.0.0.12","port":"9100","protocol":"UDP"},{"ip":"192.0.2.1"},{"ip":"10.0.0.12","at":"2000-01-01T00:00:00Z"},{"ip":"10.0.0.12","at":true}]}`
	type result struct {
		IP, Match, Via string
		Pods           []struct{ Name string }
		Services       []struct{ Name, Role string }
		Error          *struct {
			Code   int
			Reason string
		}
	}
	want := []string{"hostNetwork", "400", "service", "pod/port", "hostNetwork", "404", "410", "400"}
	check := func(t *testing.T, results []result) {
		if len(results) != len(want) {
			t.Fatalf("%d results; expect %d", len(results), len(want))
		}
		for i, r := range results {
			got := r.Match
			if r.Via != "" {
				got += "/" + r.Via
			}
			if r.Error != nil {
				got = fmt.Sprint(r.Error.Code)
			}
			if got != want[i] {
				t.Errorf("slot %d (%s): %s; expect %s", i, r.IP, got, want[i])
			}
		}
		if len(results[3].Pods) != 1 || !strings.HasPrefix(results[3].Pods[0].Name, "node-exporter") {
			t.Errorf("the port picks node-exporter: %+v", results[3].Pods)
		}
	}
	t.Run("json", func(t *testing.T) {
		rec := batch(t, s, body, "")
		var doc struct {
			Kind    string
			Results []result
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || rec.Code != 200 || doc.Kind != "IPLookupBatch" {
			t.Fatalf("%d %v %s", rec.Code, err, rec.Body)
		}
		check(t, doc.Results)
	})
	t.Run("ndjson", func(t *testing.T) {
		rec := batch(t, s, body, "application/x-ndjson")
		if ct := rec.Header().Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("Content-Type %q", ct)
		}
		var results []result
		sc := bufio.NewScanner(rec.Body)
		for sc.Scan() {
			var r result
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			results = append(results, r)
		}
		check(t, results)
	})
	for _, bad := range []string{``, `[]`, `{"queries":{}}`, `{"queries":[],"x":1}`, `{"queries":[]} {}`,
		`{"queries":[` + strings.Repeat(`{"ip":"10.0.0.1"},`, maxBatchQueries) + `{"ip":"10.0.0.1"}]}`} {
		if rec := batch(t, s, bad, ""); rec.Code != http.StatusBadRequest {
			t.Errorf("body %.40q: %d; expect 400", bad, rec.Code)
		}
	}
	if rec := batch(t, s, `{"queries":[{"ip":"`+strings.Repeat("1", maxBatchBody)+`"}]}`, ""); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body beyond the bound: %d; expect 413", rec.Code)
	}
	// Through the route table: POST with a body is served, the bound holds.
	h := s.Handler()
	for _, tt := range []struct {
		method, body string
		code         int
	}{
		{http.MethodPost, `{"queries":[{"ip":"10.96.0.1"}]}`, 200},
		{http.MethodPost, `{"queries":[{"ip":"` + strings.Repeat("1", maxBatchBody) + `"}]}`, 413},
		{http.MethodGet, ``, 405}, // not a list of a resource named "ip:lookup"
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, localRequest(tt.method, "/api/v1/ip:lookup", strings.NewReader(tt.body)))
		if rec.Code != tt.code || tt.code == 200 && !strings.Contains(rec.Body.String(), `"match":"service"`) ||
			tt.code == 405 && rec.Header().Get("Allow") != "POST, OPTIONS" {
			t.Errorf("%s through the routes: %d %.200s; expect %d", tt.method, rec.Code, rec.Body, tt.code)
		}
	}
}

// FuzzIPBatchBody: no body makes the batch panic; a body it accepts gets
// exactly one answer per query.
func FuzzIPBatchBody(f *testing.F) {
	for _, s := range []string{`{"queries":[{"ip":"10.0.0.1"}]}`, `{"queries":[{"ip":"::1","at":1.5,"port":"80","protocol":"udp"}]}`,
		`{"queries":[{"ip":"","at":null,"port":{}}]}`, `{"queries":null}`, `{`} {
		f.Add(s)
	}
	s := New(cachetest.Start(f, cachetest.PodSpec()).Cache, Options{Logger: quiet()})
	f.Fuzz(func(t *testing.T, body string) {
		rec := batch(t, s, body, "application/x-ndjson")
		queries, err := parseBatch([]byte(body), nil)
		if err != nil {
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("%q: %d after a parse error", body, rec.Code)
			}
			return
		}
		if lines := strings.Count(rec.Body.String(), "\n"); rec.Code != 200 || lines != len(queries) {
			t.Fatalf("%q: %d with %d lines for %d queries", body, rec.Code, lines, len(queries))
		}
	})
}

// TestIPBatchSlotsAreSingleAnswers: each slot of a batch is, byte for
// byte, the summary the single lookup of the same query answers (its
// kind, apiVersion, metadata and items aside), or its error's code,
// reason and message.
func TestIPBatchSlotsAreSingleAnswers(t *testing.T) {
	f, _ := startServer(t)
	s := New(f.Cache, Options{Logger: quiet()})
	h := s.Handler()
	values, err := f.Cache.IndexValues("pods", "ip", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	now := strconv.FormatFloat(float64(time.Now().UnixNano())/1e9, 'f', 3, 64)
	type query struct{ ip, at, port, protocol string }
	queries := []query{{ip: "10.0.0.12"}, {ip: "10.96.0.1"}, {ip: "192.0.2.1"}, {ip: "not-an-ip"}, {ip: "::ffff:10.0.0.12"},
		{ip: "10.0.0.12", port: "9100"}, {ip: "10.0.0.12", port: "9100", protocol: "UDP"}, {ip: "10.0.0.12", port: "0"},
		{ip: "10.0.0.12", protocol: "TCP"}, {ip: "10.0.0.12", at: now}, {ip: "10.0.0.12", at: now, port: "9100"},
		{ip: "10.96.0.1", at: now}, {ip: "10.0.0.12", at: "2000-01-01T00:00:00Z"}, {ip: "10.0.0.12", at: "yesterday"},
		{ip: "192.0.2.1", at: now}}
	for i, v := range values.Values {
		if i%7 == 0 {
			queries = append(queries, query{ip: v.Value}, query{ip: v.Value, at: now})
		}
	}
	var body strings.Builder
	body.WriteString(`{"queries":[`)
	for i, q := range queries {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"ip":%q`, q.ip)
		for _, m := range [][2]string{{"at", q.at}, {"port", q.port}, {"protocol", q.protocol}} {
			if m[1] != "" {
				fmt.Fprintf(&body, `,%q:%q`, m[0], m[1])
			}
		}
		body.WriteByte('}')
	}
	body.WriteString(`]}`)
	rec := batch(t, s, body.String(), "application/x-ndjson")
	slots := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n"), "\n")
	if rec.Code != 200 || len(slots) != len(queries) {
		t.Fatalf("%d, %d slots for %d queries: %.300s", rec.Code, len(slots), len(queries), rec.Body)
	}
	metadata := regexp.MustCompile(`,"metadata":\{"resourceVersion":"[^"]*"\}`)
	for i, q := range queries {
		params := url.Values{}
		for _, m := range [][2]string{{"at", q.at}, {"port", q.port}, {"protocol", q.protocol}} {
			if m[1] != "" {
				params.Set(m[0], m[1])
			}
		}
		single := do(t, h, http.MethodGet, "/api/v1/ip/"+url.PathEscape(q.ip)+"?"+params.Encode())
		got := slots[i]
		var want string
		switch one := single.Body.String(); {
		case single.Code != 200:
			var st, slot struct {
				Code            int
				Reason, Message string
				Error           *struct {
					Code            int
					Reason, Message string
				}
			}
			if err := json.Unmarshal([]byte(one), &st); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(got), &slot); err != nil || slot.Error == nil {
				t.Errorf("slot %d %+v: %v %s; expect the error %d", i, q, err, got, single.Code)
				continue
			}
			if st.Code != slot.Error.Code || st.Reason != slot.Error.Reason || st.Message != slot.Error.Message {
				t.Errorf("slot %d %+v: %s; expect the error of %s", i, q, got, one)
			}
			continue
		case q.at != "":
			want = "{" + strings.TrimSuffix(strings.TrimPrefix(one, `{"kind":"IPHistoryLookup","apiVersion":"kubeindex/v1",`), "\n")
		default:
			summary, _, _ := strings.Cut(strings.TrimPrefix(one, `{"kind":"PodIPLookup","apiVersion":"kubeindex/v1",`), `,"items":[`)
			want = "{" + metadata.ReplaceAllString(summary, "") + "}"
		}
		if got != want {
			t.Errorf("slot %d %+v:\n%s\nexpect\n%s", i, q, got, want)
		}
	}
}

// TestIPBatchLength: given a batch whose answer is short, when it is
// answered, then it goes out in one write with its Content-Length; given
// one whose answer passes batchFlushAt, then it goes out in parts, without
// a length, and is the same document: every slot answered, in order.
func TestIPBatchLength(t *testing.T) {
	f, _ := startServer(t)
	s := New(f.Cache, Options{Logger: quiet()})
	body := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"queries":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"ip":"10.0.0.12","port":%d}`, 1+i%65535) // a node address many pods share
		}
		b.WriteString(`]}`)
		return b.String()
	}
	short := batch(t, s, body(3), "")
	if got, want := short.Header().Get("Content-Length"), strconv.Itoa(short.Body.Len()); got != want {
		t.Errorf("a short answer's Content-Length %q; its length is %s", got, want)
	}
	const n = 8000
	long := batch(t, s, body(n), "")
	if long.Body.Len() < 2*batchFlushAt {
		t.Fatalf("the long answer is %d bytes; the test needs more than %d", long.Body.Len(), 2*batchFlushAt)
	}
	if cl := long.Header().Get("Content-Length"); cl != "" {
		t.Errorf("a long answer sent in parts claims a length %s", cl)
	}
	var doc struct {
		Results []struct {
			IP   string
			Port struct{ Number int }
		}
	}
	if err := json.Unmarshal(long.Body.Bytes(), &doc); err != nil {
		t.Fatalf("the long answer is not one JSON document: %v", err)
	}
	if len(doc.Results) != n {
		t.Fatalf("%d results; want %d", len(doc.Results), n)
	}
	for i, r := range doc.Results {
		if r.IP != "10.0.0.12" || r.Port.Number != 1+i%65535 {
			t.Fatalf("slot %d answers %s port %d", i, r.IP, r.Port.Number)
		}
	}
}
