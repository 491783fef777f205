package fakeapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/demo/scenario"
)

func TestApplyAndDelete(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 2})
	rv0 := c.ResourceVersion()
	if err := c.Apply(Pods, podJSON("shop", "mine", map[string]string{"a": "1"})); err != nil {
		t.Fatal(err)
	}
	created := gjson.ParseBytes(mustGet(t, srv.URL+"/api/v1/namespaces/shop/pods/mine"))
	for _, path := range []string{"metadata.uid", "metadata.creationTimestamp"} {
		if created.Get(path).Str == "" {
			t.Errorf("created pod lacks %s", path)
		}
	}
	if rv := created.Get("metadata.resourceVersion").Str; rv == rv0 || rv != c.ResourceVersion() {
		t.Errorf("created at rv %s; before %s, now %s", rv, rv0, c.ResourceVersion())
	}
	if created.Get("metadata.annotations").Get(scenario.SimulatedAnnotation).Exists() {
		t.Error("an applied object is marked simulated")
	}

	if err := c.Apply(Pods, podJSON("shop", "mine", map[string]string{"a": "2"})); err != nil {
		t.Fatal(err)
	}
	updated := gjson.ParseBytes(mustGet(t, srv.URL+"/api/v1/namespaces/shop/pods/mine"))
	if updated.Get("metadata.uid").Str != created.Get("metadata.uid").Str ||
		updated.Get("metadata.creationTimestamp").Str != created.Get("metadata.creationTimestamp").Str ||
		updated.Get("metadata.labels.a").Str != "2" {
		t.Errorf("update changed identity or lost the change: %s", updated.Get("metadata"))
	}

	if err := c.Delete(Pods, "shop", "mine"); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, srv.URL+"/api/v1/namespaces/shop/pods/mine"); code != http.StatusNotFound {
		t.Errorf("GET after delete = %d", code)
	}
	if err := c.Delete(Pods, "shop", "mine"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	if err := c.Apply(Nodes, []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"generateName":"extra-"}}`)); err != nil {
		t.Fatal(err)
	}
}

func TestApplyRejects(t *testing.T) {
	t.Parallel()
	c := newCluster(t, Options{Seed: 2})
	for _, tt := range []struct{ resource, obj string }{
		{"widgets", `{"metadata":{"name":"x"}}`},
		{Pods, `not json`},
		{Pods, `[1]`},
		{Pods, `{"metadata":{"name":"x"}}`},                               // namespaced without namespace
		{Nodes, `{"metadata":{"name":"x","namespace":"shop"}}`},           // cluster-scoped with one
		{Pods, `{"metadata":{"namespace":"shop"}}`},                       // no name
		{Pods, `{"kind":"Node","metadata":{"name":"x","namespace":"s"}}`}, // wrong kind
		{Deployments, `{"apiVersion":"v1","metadata":{"name":"x","namespace":"s"}}`},
	} {
		if err := c.Apply(tt.resource, []byte(tt.obj)); err == nil {
			t.Errorf("Apply(%s, %s) succeeded", tt.resource, tt.obj)
		}
	}
	if c.Objects("widgets") != nil {
		t.Error("Objects of an unknown resource is not nil")
	}
}

func TestSetUnavailable(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 2})
	w := openWatch(t, srv.URL+"/api/v1/pods?watch=true")
	waitWatchers(t, c, 1)
	c.SetUnavailable(true)
	w.ended(t)
	for _, path := range []string{"/version", "/api", "/apis/apps/v1", "/api/v1/pods", "/api/v1/pods?watch=true", "/api/v1/nodes/node-1"} {
		code, body := get(t, srv.URL+path)
		if code != http.StatusServiceUnavailable || gjson.GetBytes(body, "code").Int() != 503 {
			t.Errorf("%s during outage: %d %s", path, code, body)
		}
	}
	c.SetUnavailable(false)
	mustGet(t, srv.URL+"/api/v1/pods")
}

// TestLoadAndWrite: Load stores rendered objects without events and
// refuses a batch with a duplicate or a body without its resourceVersion;
// Write stores one with an event, as Put does.
func TestLoadAndWrite(t *testing.T) {
	t.Parallel()
	s := New(Options{Seed: 1})
	pod := func(name string, rv uint64) []byte {
		return []byte(fmt.Sprintf(`{"metadata":{"name":%q,"namespace":"ns","uid":"u-%s","resourceVersion":"%d","creationTimestamp":"2026-01-02T03:04:05Z"}}`, name, name, rv))
	}
	if err := s.Load("pods", 3, func(i int, rv uint64) ([]byte, error) { return pod(fmt.Sprint("p", i), rv), nil }); err != nil {
		t.Fatal(err)
	}
	if got := len(Controls(s).Objects("pods")); got != 3 {
		t.Fatalf("%d pods after Load; want 3", got)
	}
	if err := s.Load("pods", 2, func(int, uint64) ([]byte, error) { return pod("dup", 99), nil }); err == nil {
		t.Error("a load whose bodies lack their resourceVersion: no error")
	}
	if err := s.Load("pods", 2, func(_ int, rv uint64) ([]byte, error) { return pod("same", rv), nil }); err == nil {
		t.Error("a load of two objects with one name: no error")
	}
	if got := len(Controls(s).Objects("pods")); got != 3 {
		t.Fatalf("%d pods after refused loads; want 3", got)
	}
	rv := s.rv
	if err := s.Write("pods", func(rv uint64) ([]byte, error) { return pod("p1", rv), nil }); err != nil {
		t.Fatal(err)
	}
	evs, err := s.since(rv)
	if err != nil || len(evs) != 1 || evs[0].typ != "MODIFIED" {
		t.Fatalf("after Write: events %v, %v; want one MODIFIED", evs, err)
	}
	if err := s.Write("pods", func(uint64) ([]byte, error) { return []byte(`{"metadata":`), nil }); err == nil {
		t.Error("Write of a body that is not JSON: no error")
	}
}
