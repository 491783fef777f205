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
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo never became ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
