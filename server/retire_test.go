package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// Retiring a server ends each of its open streams with the reason, and a
// stream opened after ends at once the same way: WebSockets with a 1013
// close, SSE with an ERROR event, a /k8s watch with a 503 Status. Another
// server sharing the same Shared keeps its streams.
func TestRetireEndsEveryStreamWithTheReason(t *testing.T) {
	shared := NewShared(LimitOptions{}, StreamOptions{})
	ss := startStreams(t, Options{Shared: shared})
	other := startStreams(t, Options{Shared: shared})

	mux := openMux(t, ss)
	pods := mux.subscribe(t, "pods", `,"resource":"pods"`, nil)
	sse := openSSE(t, ss.url+"/api/v1/pods?watch=true", nil)
	kube := openKubeWatch(t, ss.url+"/k8s/api/v1/pods?watch=true", nil)
	kept := openSSE(t, other.url+"/api/v1/pods?watch=true", nil)
	cachetest.Eventually(t, "the subscription syncs", pods.isSynced)

	const why = "cluster east was removed from the configuration"
	ss.s.Retire(why)
	ss.s.Retire("a second reason is ignored")

	if ce := closeOf(t, mux.done); ce.Code != websocket.CloseTryAgainLater || ce.Text != why {
		t.Errorf("WebSocket: close %d %q; expect 1013 %q", ce.Code, ce.Text, why)
	}
	var last sseEvent
	for ev, ok := sse.next(t); ok; ev, ok = sse.next(t) {
		last = ev
	}
	if last.event != "ERROR" || gjson.Get(last.data, "code").Int() != 503 || !strings.Contains(last.data, why) {
		t.Errorf("SSE ended with %+v; expect an ERROR event, 503, saying %q", last, why)
	}
	if st := kube.last(t); st.Get("type").Str != "ERROR" || st.Get("object.code").Int() != 503 || st.Get("object.message").Str != why {
		t.Errorf("/k8s watch ended with %s; expect an ERROR event with a 503 Status saying %q", st.Raw, why)
	}
	late := openSSE(t, ss.url+"/api/v1/pods?watch=true", nil)
	if late.resp.StatusCode == http.StatusOK {
		for ev, ok := late.next(t); ok; ev, ok = late.next(t) {
			last = ev
		}
		if last.event != "ERROR" || !strings.Contains(last.data, why) {
			t.Errorf("a stream opened after the retirement ended with %+v; expect the reason", last)
		}
	}

	// The other server's stream follows changes still.
	other.f.Sim.Apply("pods", probePod("probe", "still-there", "node-1", "web"))
	for {
		ev, ok := kept.next(t)
		if !ok {
			t.Fatal("the other server's stream ended")
		}
		if strings.Contains(ev.data, "still-there") {
			break
		}
	}
}
