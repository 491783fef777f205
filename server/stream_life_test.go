package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/auth/authtest"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// startRevocable serves with TokenReview against a fake API server whose
// answers are remembered briefly, and open streams' tokens reviewed again
// every recheck.
func startRevocable(t *testing.T, recheck time.Duration) (*authtest.Server, *streamServer) {
	t.Helper()
	api := authtest.New(t, authUsers)
	tr, _ := auth.NewTokenReviewerForConfig(api.Config(), auth.TokenReviewOptions{
		Cache: auth.CacheOptions{AllowTTL: 20 * time.Millisecond, DenyTTL: 20 * time.Millisecond}})
	ss := startStreams(t, Options{Auth: AuthOptions{Authenticator: tr}, Streams: StreamOptions{Recheck: recheck},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return api, ss
}

// revoke removes alice's token and waits until the server refuses it.
func revoke(t *testing.T, api *authtest.Server, ss *streamServer) {
	t.Helper()
	api.SetTokens(map[string]auth.User{"admin-token": authUsers["admin-token"]})
	cachetest.Eventually(t, "alice's token is refused", func() bool {
		req, _ := http.NewRequest(http.MethodGet, ss.url+"/api/v1/resources", nil)
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	})
}

// closeOf waits for the end of a socket and returns its close frame.
func closeOf(t *testing.T, done <-chan error) *websocket.CloseError {
	t.Helper()
	select {
	case err := <-done:
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("socket ended with %v; expect a close frame", err)
		}
		return ce
	case <-time.After(30 * time.Second):
		t.Fatal("the socket was not closed within 30s")
	}
	return nil
}

// A socket opened before its token was revoked takes no new subscription:
// the token is reviewed again for each (here the periodic review is far
// off, so only that review can refuse it).
func TestRevokedTokenRefusesNewSubscriptions(t *testing.T) {
	api, ss := startRevocable(t, time.Hour)
	bearer := http.Header{"Authorization": {"Bearer alice-token"}}
	mux, _ := openMuxWith(t, ss.wsURL("/api/v1/stream"), bearer)
	first := mux.subscribe(t, "before", `,"resource":"pods"`, nil)
	cachetest.Eventually(t, "the first subscription syncs", first.isSynced)

	revoke(t, api, ss)
	late := mux.subscribe(t, "after", `,"resource":"pods"`, nil)
	if m := mux.expectOther(t); m.Get("id").Str != "after" || m.Get("code").Int() != 401 || m.Get("reason").Str != "Unauthorized" {
		t.Errorf("subscribing after the revocation: %s; expect a 401 ERROR", m.Raw)
	}
	if ce := closeOf(t, mux.done); ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "no longer valid") {
		t.Errorf("close %d %q; expect 1008 saying the token is no longer valid", ce.Code, ce.Text)
	}
	if late.isSynced() {
		t.Error("the subscription made after the revocation was served")
	}
}

// Every open stream ends within the recheck interval of its token's
// revocation, saying why: WebSockets (single and multiplexed) with a 1008
// close, SSE with an ERROR event, a /k8s watch with an ERROR event
// carrying a 401 Status. A stream of a token still valid goes on.
func TestRevokedTokenEndsOpenStreams(t *testing.T) {
	api, ss := startRevocable(t, 20*time.Millisecond)
	bearer := http.Header{"Authorization": {"Bearer alice-token"}}

	mux, _ := openMuxWith(t, ss.wsURL("/api/v1/stream"), bearer)
	muxPods := mux.subscribe(t, "pods", `,"resource":"pods"`, nil)
	single := dialWS(t, ss.wsURL("/api/v1/pods?watch=true"), bearer)
	singleDone := make(chan error, 1)
	go func() {
		for {
			if _, _, err := single.ReadMessage(); err != nil {
				singleDone <- err
				return
			}
		}
	}()
	sse := openSSE(t, ss.url+"/api/v1/pods?watch=true", bearer)
	admin := openSSE(t, ss.url+"/api/v1/pods?watch=true", http.Header{"Authorization": {"Bearer admin-token"}})
	kube := openKubeWatch(t, ss.url+"/k8s/api/v1/pods?watch=true", bearer)
	cachetest.Eventually(t, "the mux subscription syncs", muxPods.isSynced)

	api.SetTokens(map[string]auth.User{"admin-token": authUsers["admin-token"]})

	for name, done := range map[string]<-chan error{"multiplexed": mux.done, "single": singleDone} {
		if ce := closeOf(t, done); ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "no longer valid") {
			t.Errorf("%s WebSocket: close %d %q; expect 1008 saying the token is no longer valid", name, ce.Code, ce.Text)
		}
	}
	var last sseEvent
	for ev, ok := sse.next(t); ok; ev, ok = sse.next(t) {
		last = ev
	}
	if last.event != "ERROR" || gjson.Get(last.data, "code").Int() != 401 || gjson.Get(last.data, "reason").Str != "Unauthorized" {
		t.Errorf("SSE ended with %+v; expect an ERROR event with code 401", last)
	}
	if st := kube.last(t); st.Get("type").Str != "ERROR" || st.Get("object.code").Int() != 401 ||
		st.Get("object.reason").Str != "Unauthorized" || st.Get("object.kind").Str != "Status" {
		t.Errorf("/k8s watch ended with %s; expect an ERROR event with a 401 Status", st.Raw)
	}
	// The admin's token is valid: its stream still follows changes.
	ss.f.Sim.Apply("pods", probePod("probe", "still-there", "node-1", "web"))
	for {
		ev, ok := admin.next(t)
		if !ok {
			t.Fatal("the stream of a valid token ended")
		}
		if strings.Contains(ev.data, "still-there") {
			break
		}
	}
}

// kubeWatchClient reads a /k8s watch, one JSON event per line.
type kubeWatchClient struct {
	events chan []byte // closed at the end of the response
}

func openKubeWatch(t *testing.T, url string, header http.Header) *kubeWatchClient {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header = header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %d", url, resp.StatusCode)
	}
	c := &kubeWatchClient{events: make(chan []byte, 1<<16)}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			c.events <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	return c
}

// last waits for the end of the watch and returns its last event.
func (c *kubeWatchClient) last(t *testing.T) gjson.Result {
	t.Helper()
	var last []byte
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return gjson.ParseBytes(last)
			}
			last = ev
		case <-timeout:
			t.Fatal("the watch did not end within 30s")
		}
	}
}

// A stream ends at its lifetime with its position, and a client resuming
// from it, again and again under churn, ends up holding exactly what the
// cache holds: nothing lost, nothing twice. A /k8s watch just ends, as the
// API server ends one at its timeout.
func TestStreamLifetimeEndsResumably(t *testing.T) {
	ss := startStreams(t, Options{Streams: StreamOptions{MaxLifetime: 400 * time.Millisecond}})
	all := func() map[string]string { return cachetest.State(t, ss.f.Cache, "pods", cache.ListQuery{}) }
	var churned sync.WaitGroup
	stop := make(chan struct{})
	churned.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			churn(t, ss, 7)
		}
	})

	kube := openKubeWatch(t, ss.url+"/k8s/api/v1/pods?watch=true", nil)
	if ev := kube.last(t); ev.Get("type").Str == "ERROR" {
		t.Errorf("the /k8s watch ended with %s; expect it to just end", ev.Raw)
	}

	type segment struct {
		objs map[string]string
		rv   string
	}
	transports := map[string]func(rv string, r *replica) (ended func() string){
		"WebSocket": func(rv string, r *replica) func() string {
			path := "/api/v1/pods?watch=true"
			if rv != "" {
				path += "&resourceVersion=" + rv
			}
			conn := dialWS(t, ss.wsURL(path), nil)
			done := make(chan error, 1)
			go func() {
				for {
					_, msg, err := conn.ReadMessage()
					if err != nil {
						done <- err
						return
					}
					r.apply(msg)
				}
			}()
			return func() string {
				ce := closeOf(t, done)
				if ce.Code != websocket.CloseGoingAway || !strings.Contains(ce.Text, "lifetime") {
					t.Errorf("WebSocket closed %d %q; expect 1001 saying its lifetime is over", ce.Code, ce.Text)
				}
				return ce.Text
			}
		},
		"SSE": func(rv string, r *replica) func() string {
			h := http.Header{}
			if rv != "" {
				h.Set("Last-Event-ID", rv)
			}
			c := openSSE(t, ss.url+"/api/v1/pods?watch=true", h)
			var last sseEvent
			done := make(chan struct{})
			go func() {
				defer close(done)
				for ev := range c.events {
					r.apply([]byte(ev.data))
					last = ev
				}
			}()
			return func() string {
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Fatal("the event stream did not end within 30s")
				}
				if last.event != "BOOKMARK" || last.id == "" {
					t.Errorf("SSE ended with %+v; expect a BOOKMARK with its id", last)
				}
				return last.id
			}
		},
	}
	// Three lifetimes each under churn, resuming from the position each
	// ended with; then, once the churn is over, one more that must hold
	// what the cache holds.
	segments := map[string]*segment{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, open := range transports {
		wg.Go(func() {
			seg := &segment{}
			for n := 0; n < 3 || seg.rv == ""; n++ {
				r := newReplica(seg.objs)
				open(seg.rv, r)()
				objs, rv, err := r.snapshot()
				if err != nil {
					t.Errorf("%s, lifetime %d: %v", name, n, err)
					return
				}
				if rv != "" { // else it ended within its snapshot: nothing to resume from
					seg = &segment{objs: objs, rv: rv}
				}
			}
			mu.Lock()
			segments[name] = seg
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stop)
	churned.Wait()
	for name, seg := range segments {
		r := newReplica(seg.objs)
		end := transports[name](seg.rv, r)
		r.waitEqual(t, name+" resumed after its lifetimes", all)
		end()
	}
}

// TestTokenFloodFromAKnownUsersAddressLeavesHerStream: 1,000 bogus tokens
// from the address alice's stream comes from, while her token's answer
// expires again and again: her requests are answered and her open stream
// goes on, though the flooder is held to the address's review budget.
func TestTokenFloodFromAKnownUsersAddressLeavesHerStream(t *testing.T) {
	api, ss := startRevocable(t, 10*time.Millisecond)
	bearer := http.Header{"Authorization": {"Bearer alice-token"}}
	sse := openSSE(t, ss.url+"/api/v1/pods?watch=true", bearer)
	get := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, ss.url+"/api/v1/pods?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	tokenReviews := func() int64 { n, _ := api.Reviews(); return n }
	codes := map[int]int{}
	aliceReviewed := tokenReviews()
	for i := range 1000 {
		codes[get(fmt.Sprintf("bogus-%d", i))]++
		if i%100 == 99 {
			if code := get("alice-token"); code != http.StatusOK {
				t.Fatalf("alice during the flood (%d bogus tokens): %d; expect 200", i+1, code)
			}
		}
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Fatalf("1,000 bogus tokens from one address: %v; expect 429s beyond its budget", codes)
	}
	// Her answer outlives 20ms only: her stream's token was reviewed again
	// during the flood, and was not refused for the flooder's sake.
	cachetest.Eventually(t, "alice's token is reviewed again", func() bool {
		return tokenReviews() > aliceReviewed+int64(codes[http.StatusUnauthorized])
	})
	if code := get("alice-token"); code != http.StatusOK {
		t.Fatalf("alice after the flood: %d; expect 200", code)
	}
	ss.f.Sim.Apply("pods", probePod("probe", "after-the-flood", "node-1", "web"))
	for {
		ev, ok := sse.next(t)
		if !ok || ev.event == "ERROR" {
			t.Fatalf("alice's stream ended during the flood: %+v", ev)
		}
		if strings.Contains(ev.data, "after-the-flood") {
			break
		}
	}
	t.Logf("1,000 bogus tokens from alice's address: answers %v", codes)
}
