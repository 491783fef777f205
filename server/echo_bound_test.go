package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestErrorsDoNotEchoHugeInput: values of 64 KB (and 8 KB, the most a
// query parameter may hold) in names, selectors, query parameters, a
// Last-Event-ID, an Origin and a batch query come back as short errors:
// what is echoed is cut.
func TestErrorsDoNotEchoHugeInput(t *testing.T) {
	ss := startStreams(t, Options{MaxHeaderBytes: 1 << 20})
	big, param := strings.Repeat("x", 64<<10), strings.Repeat("y", 8<<10)
	const bound = 4 << 10
	tests := []struct {
		name, method, path, body string
		header                   map[string]string
	}{
		{"a namespaced name", "GET", "/api/v1/pods/default/" + big, "", nil},
		{"a cluster-scoped name", "GET", "/api/v1/nodes/" + big, "", nil},
		{"a namespace", "GET", "/api/v1/pods/" + big + "/web-0", "", nil},
		{"a resource", "GET", "/api/v1/" + big, "", nil},
		{"an index", "GET", "/api/v1/pods?index=" + param + "&value=a", "", nil},
		{"an index value", "GET", "/api/v1/pods?index=ip&value=" + param, "", nil},
		{"a label selector", "GET", "/api/v1/pods?labelSelector=" + param + "!!", "", nil},
		{"a query parameter's name", "GET", "/api/v1/pods?" + big + "=1", "", nil},
		{"a long query value", "GET", "/api/v1/pods?namespace=" + big, "", nil},
		{"a limit", "GET", "/api/v1/pods?limit=" + param, "", nil},
		{"a continue token", "GET", "/api/v1/pods?continue=" + param, "", nil},
		{"an address", "GET", "/api/v1/ip/" + big, "", nil},
		{"a moment", "GET", "/api/v1/ip/10.0.0.1?at=" + param, "", nil},
		{"a watch value", "GET", "/api/v1/pods?watch=" + param, "", nil},
		{"a resourceVersion", "GET", "/api/v1/pods?watch=true&resourceVersion=" + param, "", map[string]string{"Accept": "text/event-stream"}},
		{"a Last-Event-ID", "GET", "/api/v1/pods?watch=true", "", map[string]string{"Accept": "text/event-stream", "Last-Event-ID": big}},
		{"a diff", "GET", "/api/v1/pods?watch=true&diff=" + param, "", map[string]string{"Accept": "text/event-stream"}},
		{"an Origin", "GET", "/api/v1/pods?watch=true", "", map[string]string{"Origin": "http://" + big,
			"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}},
		{"a batch address", "POST", "/api/v1/ip:lookup", `{"queries":[{"ip":"` + big + `"}]}`, nil},
		{"a dashboard file", "GET", "/ui/" + big, "", nil},
		{"a Kubernetes name", "GET", "/k8s/api/v1/namespaces/default/pods/" + big, "", nil},
		{"a Kubernetes namespace", "GET", "/k8s/api/v1/namespaces/" + big + "/pods", "", nil},
		{"a Kubernetes field selector", "GET", "/k8s/api/v1/pods?fieldSelector=" + big + "=1", "", nil},
		{"a Kubernetes label selector", "GET", "/k8s/api/v1/pods?labelSelector=" + big + "!!", "", nil},
		{"a Kubernetes resourceVersion", "GET", "/k8s/api/v1/pods?resourceVersion=" + big, "", nil},
		{"a Kubernetes continue", "GET", "/k8s/api/v1/pods?continue=" + big, "", nil},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, ss.url+tt.path, strings.NewReader(tt.body))
		for k, v := range tt.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode < 400 && tt.method != "POST" {
			t.Errorf("%s: %d; expect an error", tt.name, resp.StatusCode)
		}
		if len(body) > bound || strings.Contains(string(body), strings.Repeat("x", 2048)) {
			t.Errorf("%s: %d, a %d-byte answer: %.300s…", tt.name, resp.StatusCode, len(body), body)
		}
	}
}
