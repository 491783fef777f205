package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestRunDemoEndToEnd(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--demo", "--listen", addr, "--index", "pods:image=path:spec.containers.#.image"}, env(nil), io.Discard)
	}()

	base := "http://" + addr
	waitReady(t, base)
	resp, err := http.Get(base + "/api/v1/resources")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Simulated bool
		Resources []struct {
			Name    string
			Count   int
			Indexes []struct{ Name string }
		}
	}
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if !body.Simulated || resp.Header.Get("X-Kubeindex-Simulated") != "true" {
		t.Error("the demo is not labelled as simulated")
	}
	if len(body.Resources) != 6 || body.Resources[0].Name != "pods" || body.Resources[0].Count == 0 || len(body.Resources[0].Indexes) != 4 {
		t.Errorf("resources %+v", body.Resources)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after cancel: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop after cancel")
	}
}

// waitReady polls /readyz until it answers 200, failing after 20s.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo never became ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunShortNamesGetDefaults: `--resources po,svc`, as a new user types
// it, serves pods with their default indexes, so IP lookups answer.
func TestRunShortNamesGetDefaults(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--demo", "--listen", addr, "--resources", "po,svc"}, env(nil), io.Discard)
	}()
	defer func() { cancel(); <-done }()
	base := "http://" + addr
	waitReady(t, base)

	var resources struct {
		Resources []struct {
			Name    string
			Indexes []struct{ Name string }
		}
	}
	getJSON(t, base+"/api/v1/resources", &resources)
	var pods []string
	for _, ix := range resources.Resources[0].Indexes {
		pods = append(pods, ix.Name)
	}
	if resources.Resources[0].Name != "pods" || strings.Join(pods, ",") != "ip,node,owner" {
		t.Fatalf("resources %+v; expect pods with ip,node,owner", resources.Resources)
	}
	var list struct {
		Items []struct{ Status struct{ PodIP string } }
	}
	getJSON(t, base+"/api/v1/pods?limit=1", &list)
	if len(list.Items) == 0 || list.Items[0].Status.PodIP == "" {
		t.Fatalf("no pod with an IP: %+v", list)
	}
	var lookup struct{ Pods []struct{ Name string } }
	getJSON(t, base+"/api/v1/ip/"+list.Items[0].Status.PodIP, &lookup)
	if len(lookup.Pods) == 0 {
		t.Errorf("IP lookup of %s found no pod", list.Items[0].Status.PodIP)
	}
}

// getJSON decodes a 200 answer into v, failing on any other status.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func TestRunUnknownResourceStopsStartup(t *testing.T) {
	err := run(context.Background(), []string{"--demo", "--listen", freeAddr(t), "--resources", "pods,widgets,deployments.apps,frobs"}, env(nil), io.Discard)
	if err == nil {
		t.Fatal("expect start-up to fail")
	}
	for _, want := range []string{`"widgets"`, `"frobs"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
