package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

func TestParseAt(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2026-01-02T03:04:05Z", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), true},
		{"2026-01-02T03:04:05.25+01:00", time.Date(2026, 1, 2, 2, 4, 5, 250e6, time.UTC), true},
		{"1767323045", time.Unix(1767323045, 0), true},
		{"1767323045.5", time.Unix(1767323045, 5e8), true},
		{"1767323045.000000001", time.Unix(1767323045, 1), true},
		{"0", time.Unix(0, 0), true},
		{"1767323045.0000000001", time.Time{}, false}, // finer than a nanosecond
		{"-1", time.Time{}, false},
		{"1e9", time.Time{}, false},
		{".5", time.Time{}, false},
		{"5.", time.Time{}, true}, // "5." is five seconds
		{"2026-01-02", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		{"99999999999999", time.Time{}, false},
		{"1969-12-31T23:59:59Z", time.Time{}, false},
	}
	for _, tt := range tests {
		got, err := parseAt(tt.in)
		if (err == nil) != tt.ok || tt.ok && !tt.want.IsZero() && !got.Equal(tt.want) {
			t.Errorf("parseAt(%q) = %s, %v; expect %s, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// FuzzIPQuery: no at, port or protocol makes the parser panic, and what
// it accepts is a real moment and a real port.
func FuzzIPQuery(f *testing.F) {
	for _, s := range [][3]string{{"2026-01-02T03:04:05Z", "9100", "TCP"}, {"1767323045.5", "53", "udp"}, {"", "", ""}, {"1.2.3", "0x10", "tcp "}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, at, port, protocol string) {
		q, err := parseIPQuery("10.0.0.1", at, port, protocol)
		if err != nil {
			return
		}
		if at != "" && (q.At.IsZero() || q.At.Year() < 1970) {
			t.Fatalf("at %q accepted as %s", at, q.At)
		}
		if port != "" && (q.Port.Number < 1 || q.Port.Number > 65535) {
			t.Fatalf("port %q accepted as %v", port, q.Port)
		}
	})
}

// TestIPLookupAtOverHTTP: ?at= answers from the history with the owners'
// intervals; a moment before it is a 410; the history shows in /metrics.
func TestIPLookupAtOverHTTP(t *testing.T) {
	_, h := startServer(t)
	now := strconv.FormatFloat(float64(time.Now().UnixNano())/1e9, 'f', 3, 64)
	rec := do(t, h, http.MethodGet, "/api/v1/ip/10.0.0.12?port=9100&at="+now)
	var body struct {
		Kind, Certainty, Match, Via string
		Owners                      []struct{ Kind, Name, Role, Since string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	// The pod declaring the port, and the node whose address it is.
	var pods, nodes int
	for _, o := range body.Owners {
		switch {
		case o.Kind == "Pod" && strings.HasPrefix(o.Name, "node-exporter") && o.Since == "start":
			pods++
		case o.Kind == "Node" && o.Role == "nodeInternal":
			nodes++
		}
	}
	if body.Kind != "IPHistoryLookup" || body.Match != "pod" || body.Via != "port" || len(body.Owners) != 2 || pods != 1 || nodes != 1 {
		t.Errorf("%s", rec.Body)
	}
	if rec := do(t, h, http.MethodGet, "/api/v1/ip/10.0.0.12?at=2000-01-01T00:00:00Z"); rec.Code != http.StatusGone || !strings.Contains(rec.Body.String(), `"reason":"BeforeHistory"`) {
		t.Errorf("before the history: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, http.MethodGet, "/api/v1/ip/10.0.0.12?protocol=UDP"); rec.Code != http.StatusBadRequest {
		t.Errorf("protocol without port: %d", rec.Code)
	}
	metrics := do(t, h, http.MethodGet, "/metrics").Body.String()
	for _, m := range []string{"kubeindex_ip_history_open_intervals ", `kubeindex_ip_history_evicted_total{reason="cap"} 0`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

// TestIPLookupAtWithPortsThatChanged: given two Services sharing an
// external IP, web declaring 80 and api 8080, when web is updated to
// declare 443 instead while it keeps the address, then
// ?at=<before the update>&port= narrows by the ports declared then (80 is
// web's, 443 nobody's) and ?at=<after it> by the new ones.
func TestIPLookupAtWithPortsThatChanged(t *testing.T) {
	f, h := startServer(t)
	const ip = "10.200.0.9"
	svc := func(name string, port int) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Service","metadata":{"namespace":"default","name":%q,"uid":"uid-%s"},`+
			`"spec":{"type":"ClusterIP","clusterIP":"None","externalIPs":[%q],"ports":[{"port":%d,"protocol":"TCP"}]}}`, name, name, ip, port)
	}
	at := func(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
	// narrowed: the answer at moment (now when zero) to port names one
	// Service, via the port.
	narrowed := func(moment time.Time, port int) bool {
		q := fmt.Sprintf("/api/v1/ip/%s?port=%d", ip, port)
		if !moment.IsZero() {
			q += "&at=" + at(moment)
		}
		return strings.Contains(do(t, h, http.MethodGet, q).Body.String(), `"via":"port"`)
	}
	for _, s := range [][]byte{svc("web", 80), svc("api", 8080)} {
		if err := f.Sim.Apply("services", s); err != nil {
			t.Fatal(err)
		}
	}
	var before, after time.Time
	cachetest.Eventually(t, "the history holds both Services", func() bool {
		before = time.Now()
		return narrowed(before, 80) && narrowed(before, 8080)
	})
	if err := f.Sim.Apply("services", svc("web", 443)); err != nil {
		t.Fatal(err)
	}
	cachetest.Eventually(t, "the history has web declaring 443", func() bool {
		after = time.Now()
		return narrowed(after, 443)
	})
	for _, c := range []struct {
		at   time.Time
		port int
		want string // the one Service narrowed to; "" when none declares the port
	}{
		{before, 80, "web"}, {before, 8080, "api"}, {before, 443, ""},
		{after, 443, "web"}, {after, 8080, "api"}, {after, 80, ""},
	} {
		rec := do(t, h, http.MethodGet, fmt.Sprintf("/api/v1/ip/%s?port=%d&at=%s", ip, c.port, at(c.at)))
		var body struct {
			Match, Via string
			Port       struct{ Declared bool }
			Owners     []struct{ Name string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		var names []string
		for _, o := range body.Owners {
			names = append(names, o.Name)
		}
		got := strings.Join(names, " ")
		if c.want == "" && (body.Via != "" || body.Port.Declared || len(body.Owners) != 2) ||
			c.want != "" && (body.Via != "port" || body.Match != "service" || got != c.want) {
			t.Errorf("port %d at %s: %s; want %q", c.port, at(c.at), rec.Body, c.want)
		}
	}
}
