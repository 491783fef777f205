package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// hostileGET is a raw GET of target with extra header lines.
func hostileGET(target string, headers ...string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: localhost:8080\r\n" + strings.Join(append(headers, ""), "\r\n") + "\r\n"
}

// hostileRequests are sent byte for byte to the real server. Each must be
// answered with its 4xx; code is the one expected.
var hostileRequests = []struct {
	name string
	req  string
	code int
}{
	// Sizes
	{"a 70 KiB header", hostileGET("/api/v1/pods", "X-Big: "+strings.Repeat("a", 70<<10)), 431},
	{"5000 headers", hostileGET("/api/v1/pods", slices.Repeat([]string{"X-Many: aaaaaaaaaaaa"}, 5000)...), 431},
	{"a 60 KiB path", hostileGET("/api/v1/pods/" + strings.Repeat("a", 60<<10) + "/x"), 404},
	{"a path of 10000 segments", hostileGET("/" + strings.Repeat("a/", 10000)), 404},
	{"a 9 KiB label selector", hostileGET("/api/v1/pods?labelSelector=" + strings.Repeat("a%21%3Db,", 1900) + "a%21%3Db"), 400},
	{"a 9 KiB index value", hostileGET("/api/v1/pods?index=node&value=" + strings.Repeat("n", 9<<10)), 400},
	{"a 9 KiB unknown parameter name", hostileGET("/api/v1/pods?" + strings.Repeat("x", 9<<10) + "=1"), 400},
	{"a body", "GET /api/v1/pods HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello", 413},
	{"a 1 MiB body announced", "GET /api/v1/pods HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1048576\r\n\r\n", 413},
	{"a chunked body", "GET /api/v1/pods HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 413},
	{"a body behind Expect", "GET /api/v1/pods HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n", 413},
	// Limits and numbers
	{"an enormous limit", hostileGET("/api/v1/pods?limit=99999999999999999999999999"), 400},
	{"a limit above the maximum", hostileGET("/api/v1/pods?limit=100001"), 400},
	{"a negative limit", hostileGET("/api/v1/pods?limit=-1"), 400},
	{"a hex limit", hostileGET("/api/v1/pods?limit=0x10"), 400},
	{"an enormous index-values limit", hostileGET("/api/v1/resources/pods/indexes/node?limit=1e99"), 400},
	// Traversal
	{"../ in the path", hostileGET("/api/v1/../../etc/passwd"), 404},
	{"encoded ../", hostileGET("/api/v1/pods/%2e%2e/%2e%2e"), 404},
	{"encoded slashes", hostileGET("/api/v1/pods/..%2f..%2fetc/passwd"), 404},
	{"traversal into the dashboard", hostileGET("/ui/..%2f..%2fgo.mod"), 404},
	{"dashboard ..", hostileGET("/ui/.."), 404},
	{"traversal from the root", hostileGET("/%2e%2e/%2e%2e/etc/passwd"), 404},
	{"overlong UTF-8 dots", hostileGET("/api/v1/pods/%c0%ae%c0%ae/x"), 404},
	{"a resource with a slash", hostileGET("/api/v1/pods%2Fkube-system"), 404},
	{"backslashes", hostileGET(`/api/v1/pods/..\..\etc`), 400}, // a cluster-scoped get of a namespaced resource
	// Encodings
	{"invalid UTF-8 in a namespace", hostileGET("/api/v1/pods?namespace=%ff%fe"), 400},
	{"invalid UTF-8 in a selector", hostileGET("/api/v1/pods?labelSelector=app%3D%ff"), 400},
	{"invalid UTF-8 in a resource", hostileGET("/api/v1/%ff%fe"), 404},
	{"invalid UTF-8 raw in the path", hostileGET("/api/v1/pods/\xff/\xfe"), 404},
	{"a NUL in a selector", hostileGET("/api/v1/pods?labelSelector=app%3Dweb%00"), 400},
	{"a NUL in a namespace", hostileGET("/api/v1/pods?namespace=a%00b"), 400},
	{"a NUL in a path parameter", hostileGET("/api/v1/pods/%00/x"), 404},
	{"a control character in a value", hostileGET("/api/v1/pods?index=node&value=node-1%0d%0aX-Injected:%201"), 400},
	{"invalid UTF-8 in an index value", hostileGET("/api/v1/pods?index=node&value=%c3%28"), 400},
	{"a raw NUL in the request line", hostileGET("/api/v1/pods/\x00"), 400},
	{"a malformed escape", hostileGET("/api/v1/pods?namespace=%zz"), 400},
	{"a semicolon separator", hostileGET("/api/v1/pods?namespace=a;limit=1"), 400},
	{"a fullwidth resource name", hostileGET("/api/v1/%EF%BD%90%EF%BD%8F%EF%BD%84%EF%BD%93"), 404},
	{"a namespace too long", hostileGET("/api/v1/pods?namespace=" + strings.Repeat("a", 300)), 400},
	// Queries
	{"a duplicated parameter", hostileGET("/api/v1/pods?limit=1&limit=2"), 400},
	{"a misspelt parameter", hostileGET("/api/v1/pods?labelselector=app%3Dweb"), 400},
	{"a forged continue token", hostileGET("/api/v1/pods?continue=eyJyIjoibm9kZXMiLCJhIjoieCJ9"), 400},
	{"garbage continue", hostileGET("/api/v1/pods?continue=%22%3E%3Cscript%3E"), 400},
	{"an index without a value", hostileGET("/api/v1/pods?index=node"), 400},
	{"an IP index with a bad address", hostileGET("/api/v1/pods?index=ip&value=999.1.1.1"), 400},
	{"a 10k-character IP", hostileGET("/api/v1/ip/" + strings.Repeat("1", 10000)), 400},
	{"a mapped bad IP", hostileGET("/api/v1/ip/::ffff:999.1.1.1"), 400},
	{"watch without a stream", hostileGET("/api/v1/pods?watch=true"), 400},
	{"a stream that is not a WebSocket", hostileGET("/api/v1/stream"), 400},
	{"a WebSocket upgrade with a bad version", hostileGET("/api/v1/stream", "Connection: Upgrade", "Upgrade: websocket",
		"Sec-WebSocket-Version: 7", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="), 400},
	{"a WebSocket from another origin", hostileGET("/api/v1/stream", "Connection: Upgrade", "Upgrade: websocket",
		"Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Origin: https://evil.example"), 403},
	// Protocol
	{"POST", "POST /api/v1/pods HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", 405},
	{"DELETE", "DELETE /api/v1/pods/kube-system/x HTTP/1.1\r\nHost: localhost\r\n\r\n", 405},
	{"an invented method", "FOO /api/v1/pods HTTP/1.1\r\nHost: localhost\r\n\r\n", 405},
	{"a malformed method", "G@T /api/v1/pods HTTP/1.1\r\nHost: localhost\r\n\r\n", 400},
	{"no Host", "GET /api/v1/pods HTTP/1.1\r\n\r\n", 400},
	// DNS rebinding: a page of attacker.example rebound to 127.0.0.1
	{"another site's Host", "GET /api/v1/pods?limit=1 HTTP/1.1\r\nHost: attacker.example:8080\r\n\r\n", 403},
	{"another site's Host, upper case", "GET /readyz HTTP/1.1\r\nHost: ATTACKER.example\r\n\r\n", 403},
	{"a name that only starts like localhost", "GET /api/v1/pods HTTP/1.1\r\nHost: localhost.attacker.example\r\n\r\n", 403},
	{"a rebound WebSocket", "GET /api/v1/stream HTTP/1.1\r\nHost: attacker.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://attacker.example\r\n\r\n", 403},
	// The security probe's attempts (docs/security.md, "The probe's
	// attempts"), each with the answer it must keep getting.
	{"Host 127.1", "GET /api/v1/pods?limit=1 HTTP/1.1\r\nHost: 127.1\r\n\r\n", 403},
	{"Host 0x7f.0.0.1", "GET /api/v1/pods?limit=1 HTTP/1.1\r\nHost: 0x7f.0.0.1\r\n\r\n", 403},
	{"Host 2130706433", "GET /api/v1/pods?limit=1 HTTP/1.1\r\nHost: 2130706433\r\n\r\n", 403},
	{"Host 127.0.0.1.nip.io", "GET /api/v1/pods?limit=1 HTTP/1.1\r\nHost: 127.0.0.1.nip.io\r\n\r\n", 403},
	{"an h2c upgrade from another site", "GET /api/v1/pods HTTP/1.1\r\nHost: evil.example\r\nConnection: Upgrade, HTTP2-Settings\r\n" +
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n", 403},
	{"a WebSocket to localhost from an evil Origin", hostileGET("/api/v1/stream", "Connection: Upgrade", "Upgrade: websocket",
		"Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Origin: http://evil.example"), 403},
	{"a WebSocket to localhost from Origin null", hostileGET("/api/v1/stream", "Connection: Upgrade", "Upgrade: websocket",
		"Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Origin: null"), 403},
	{"a WebSocket to localhost from Origin 127.0.0.1", hostileGET("/api/v1/stream", "Connection: Upgrade", "Upgrade: websocket",
		"Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Origin: http://127.0.0.1:8080"), 403},
	{"a cross-site text/plain IP batch", "POST /api/v1/ip:lookup HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\n" +
		"Content-Type: text/plain\r\nContent-Length: 31\r\n\r\n" + `{"queries":[{"ip":"10.0.0.1"}]}`, 403},
	{"a cross-site form IP batch", "POST /api/v1/ip:lookup HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\n" +
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 31\r\n\r\n" + `{"queries":[{"ip":"10.0.0.1"}]}`, 403},
	{"an IP batch of 10,001", batchPOST(`{"queries":[` + strings.TrimSuffix(strings.Repeat(`{"ip":"10.0.0.1"},`, 10001), ",") + "]}"), 400},
	{"an IP batch over 2 MiB", batchPOST(`{"queries":[` + strings.Repeat(" ", 2<<20) + "]}"), 413},
	{"a malformed IP batch", batchPOST(`{"queries":[{"ip":"10.0.0.1"`), 400},
	{"an IP batch with trailing data", batchPOST(`{"queries":[{"ip":"10.0.0.1"}]} x`), 400},
	{"an IP batch nested 200k deep", batchPOST(`{"queries":` + strings.Repeat("[", 200000)), 400},
	{"an NDJSON IP batch body", batchPOST("{\"ip\":\"10.0.0.1\"}\n{\"ip\":\"10.0.0.2\"}\n"), 400},
	{"an IP batch with an unknown field", batchPOST(`{"queries":[{"ip":"10.0.0.1","owner":"x"}]}`), 400},
	{"at 2263", hostileGET("/api/v1/ip/10.0.0.12?at=2263-01-01T00:00:00Z"), 400},
	{"at 9999999999", hostileGET("/api/v1/ip/10.0.0.12?at=9999999999"), 400},
	{"at 1e9", hostileGET("/api/v1/ip/10.0.0.12?at=1e9"), 400},
	{"at NaN", hostileGET("/api/v1/ip/10.0.0.12?at=NaN"), 400},
	{"at negative", hostileGET("/api/v1/ip/10.0.0.12?at=-5"), 400},
	{"at in Unicode digits", hostileGET("/api/v1/ip/10.0.0.12?at=%D9%A1%D9%A2%D9%A3"), 400},
	{"101 label terms", hostileGET("/api/v1/pods?labelSelector=" + strings.TrimSuffix(strings.Repeat("a%3Db,", 101), ",")), 400},
	{"!×4000", hostileGET("/api/v1/pods?labelSelector=" + strings.Repeat("!", 4000) + "a"), 400},
	{"/k8s: 60 field and 60 label terms", hostileGET("/k8s/api/v1/pods?fieldSelector=" + strings.TrimSuffix(strings.Repeat("spec.nodeName%3Dn,", 60), ",") +
		"&labelSelector=" + strings.TrimSuffix(strings.Repeat("a%3Db,", 60), ",")), 400},
	{"/k8s: an 8,300-character fieldSelector", hostileGET("/k8s/api/v1/pods?fieldSelector=spec.nodeName%3D" + strings.Repeat("n", 8300)), 400},
	{"/k8s: a 9 KiB labelSelector", hostileGET("/k8s/api/v1/pods?labelSelector=a%3D" + strings.Repeat("b", 9<<10)), 400},
	{"/k8s: an unsupported field label", hostileGET("/k8s/api/v1/pods?fieldSelector=spec.foo%3D1"), 400},
	{"a NUL in a /k8s selector", hostileGET("/k8s/api/v1/pods?labelSelector=a%3Db%00"), 400},
	{"Content-Length and chunked", "GET /api/v1/pods HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 413}, // chunked wins (RFC 9112)
	{"two Content-Lengths", "GET /api/v1/pods HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
	{"a header without a colon", "GET /api/v1/pods HTTP/1.1\r\nHost: localhost\r\nBroken\r\n\r\n", 400},
}

// batchPOST is a raw IP batch of body, as a client without an Origin sends it.
func batchPOST(body string) string {
	return fmt.Sprintf("POST /api/v1/ip:lookup HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// TestHostileRequests sends each hostile request to the real server, then
// checks that normal requests still answer exactly what they answered
// before: nothing affected, nothing lost.
func TestHostileRequests(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	s, addr := serveReal(t, f.Cache, Options{})
	normal := []string{"/api/v1/pods", "/api/v1/nodes/node-1", "/api/v1/ip/10.0.0.12", "/api/v1/resources/pods/indexes/node"}
	baseline := map[string]string{}
	for _, p := range normal {
		code, body := rawRequest(t, addr, hostileGET(p))
		if code != 200 {
			t.Fatalf("%s: %d before anything hostile", p, code)
		}
		baseline[p] = body
	}
	for _, tt := range hostileRequests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := rawRequest(t, addr, tt.req)
			if code != tt.code {
				t.Errorf("%d %.200s; expect %d", code, body, tt.code)
			}
			if code >= 500 {
				t.Errorf("a server error: %.200s", body)
			}
			for _, p := range normal {
				if code, body := rawRequest(t, addr, hostileGET(p)); code != 200 || body != baseline[p] {
					t.Fatalf("after it, %s answers %d and differs: %v", p, code, body != baseline[p])
				}
			}
		})
	}
	if n, _, _ := s.limits.counts(); n > 1 {
		cachetest.Eventually(t, "every hostile connection is closed", func() bool { n, _, _ := s.limits.counts(); return n == 0 })
	}
	if !maps.Equal(cachetest.State(t, f.Cache, "pods", cache.ListQuery{}), simState(f, "pods")) {
		t.Error("the cache no longer equals the API server")
	}
	t.Logf("%d hostile requests, each followed by %d normal ones", len(hostileRequests), len(normal))
}

// simState is what the fake API server holds: key → resourceVersion.
func simState(f *cachetest.Fixture, resource string) map[string]string {
	out := map[string]string{}
	for _, raw := range f.Sim.Objects(resource) {
		m := gjson.ParseBytes(raw).Get("metadata")
		key := m.Get("name").Str
		if ns := m.Get("namespace").Str; ns != "" {
			key = ns + "/" + key
		}
		out[key] = m.Get("resourceVersion").Str
	}
	return out
}

// TestHostileStreamMessages: each hostile message on a multiplexed socket
// gets the documented answer (an ERROR, or close code 1009 beyond 1 MiB),
// and the socket, the other sockets and REST go on.
func TestHostileStreamMessages(t *testing.T) {
	ss := startStreams(t, Options{})
	bystander := newReplica(nil)
	followWS(dialWS(t, ss.wsURL("/api/v1/pods?watch=true"), nil), bystander)
	mux := openMux(t, ss)
	messages := []struct {
		name string
		typ  int
		msg  string
		code int64
	}{
		{"deep arrays", websocket.TextMessage, strings.Repeat("[", 8000) + strings.Repeat("]", 8000), 400},
		{"deep objects", websocket.TextMessage, `{"op":` + strings.Repeat(`{"a":`, 3000) + "1" + strings.Repeat("}", 3001), 400},
		{"unbalanced nesting", websocket.TextMessage, strings.Repeat(`{"a":[`, 2500), 400},
		{"deep value in a known field", websocket.TextMessage, `{"op":"subscribe","id":"d","resource":"pods","snapshot":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}", 400},
		{"100 KiB", websocket.TextMessage, `{"op":"subscribe","id":"big","resource":"` + strings.Repeat("p", 100<<10) + `"}`, 400},
		{"invalid UTF-8", websocket.TextMessage, "{\"op\":\"subscribe\",\"id\":\"\xff\xfe\",\"resource\":\"pods\"}", 400},
		{"a raw NUL", websocket.TextMessage, "{\"op\":\"subscribe\",\"id\":\"n\",\"resource\":\"po\x00ds\"}", 400},
		{"an escaped NUL in a resource", websocket.TextMessage, `{"op":"subscribe","id":"n","resource":"po\u0000ds"}`, 404},
		{"an escaped NUL in a selector", websocket.TextMessage, `{"op":"subscribe","id":"n","resource":"pods","labelSelector":"app=web\u0000,x"}`, 400},
		{"binary", websocket.BinaryMessage, `{"op":"subscribe","id":"b","resource":"pods"}`, 400},
		{"a long selector", websocket.TextMessage, `{"op":"subscribe","id":"s","resource":"pods","labelSelector":"` + strings.Repeat("a in (b),", 1500) + `"}`, 400},
		{"an unknown resource", websocket.TextMessage, `{"op":"subscribe","id":"u","resource":"../../etc/passwd"}`, 404},
		{"a bad namespace", websocket.TextMessage, `{"op":"subscribe","id":"ns","resource":"pods","namespace":"%ff"}`, 400},
		{"a misspelt field", websocket.TextMessage, `{"op":"subscribe","id":"m","resource":"pods","Namespace":"x"}`, 400},
		{"two objects", websocket.TextMessage, `{"op":"unsubscribe","id":"x"}{"op":"unsubscribe","id":"x"}`, 400},
		{"an unknown id", websocket.TextMessage, `{"op":"unsubscribe","id":"never"}`, 400},
		{"an empty message", websocket.TextMessage, ``, 400},
		{"a bad resume position", websocket.TextMessage, `{"op":"subscribe","id":"rv","resource":"pods","resourceVersion":"-1"}`, 400},
	}
	for _, m := range messages {
		if err := mux.conn.WriteMessage(m.typ, []byte(m.msg)); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		got := mux.expectOther(t)
		if got.Get("type").Str != "ERROR" || got.Get("code").Int() != m.code {
			t.Errorf("%s: %.200s; expect an ERROR %d", m.name, got.Raw, m.code)
		}
	}
	// The socket still works.
	ok := mux.subscribe(t, "ok", `,"resource":"pods","namespace":"kube-system"`, nil)
	ok.waitEqual(t, "a subscription after the hostile messages", func() map[string]string {
		return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{Namespace: "kube-system"})
	})

	// Thousands of subscriptions on one socket: 100 are taken, the rest refused.
	flood := openMux(t, ss)
	const n = 3000
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := range n {
			flood.conn.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"op":"subscribe","id":"f%d","resource":"nodes","snapshot":false}`, i))
		}
	}()
	refused, taken := 0, 0
	for refused+taken < n {
		switch m := flood.expectOther(t); {
		case m.Get("type").Str == "SYNCED":
			taken++
		case m.Get("type").Str == "ERROR" && m.Get("code").Int() == 429:
			refused++
		default:
			t.Fatalf("flood: %s; expect SYNCED or a 429 ERROR", m.Raw)
		}
	}
	if taken != 100 {
		t.Errorf("%d subscriptions taken on one socket; expect 100", taken)
	}
	// The flood's 100, the good one and the bystander's.
	cachetest.Eventually(t, "100 subscriptions held", func() bool { return ss.s.streams.subscribers.Load() == 102 })

	// Beyond 1 MiB the socket is closed with 1009; nobody else notices.
	<-written // the answer to the last message may come before its write returns
	flood.conn.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 1<<20+1)))
	select {
	case err := <-flood.done:
		if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
			t.Errorf("after 1 MiB: %v; expect close 1009", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the socket stayed open after a message above 1 MiB")
	}
	cachetest.Eventually(t, "the flood's subscriptions released", func() bool { return ss.s.streams.subscribers.Load() == 2 })

	if err := ss.f.Sim.Apply("pods", probePod("kube-system", "after-hostile", "node-1", "x")); err != nil {
		t.Fatal(err)
	}
	all := func() map[string]string { return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{}) }
	cachetest.Eventually(t, "the cache equals the API server", func() bool { return maps.Equal(all(), simState(ss.f, "pods")) })
	bystander.waitEqual(t, "the bystander socket saw everything", all)
	ok.waitEqual(t, "the hostile socket's good subscription saw everything", func() map[string]string {
		return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{Namespace: "kube-system"})
	})
	t.Logf("%d hostile messages, %d subscriptions on one socket (%d refused), one message of 1 MiB+1", len(messages), n, refused)
}
