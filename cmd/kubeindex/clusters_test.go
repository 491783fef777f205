package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubeconfig writes a kubeconfig with one context per name, each a
// cluster at server.
func kubeconfig(t *testing.T, server string, contexts ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n")
	for _, c := range contexts {
		b.WriteString("- name: " + c + "\n  cluster: {server: \"" + server + "\"}\n")
	}
	b.WriteString("users:\n- name: u\n  user: {token: t}\ncontexts:\n")
	for _, c := range contexts {
		b.WriteString("- name: " + c + "\n  context: {cluster: " + c + ", user: u}\n")
	}
	b.WriteString("current-context: " + contexts[0] + "\n")
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClustersFromFlagsAndFile(t *testing.T) {
	kc := kubeconfig(t, "https://127.0.0.1:6443", "east-admin", "west-admin")
	cfg, err := parseConfig([]string{"--kubeconfig", kc, "--cluster", "name=east,context=east-admin",
		"--cluster", "name=west, context=west-admin, kubeconfig=" + kc}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.fleet() || len(cfg.Clusters) != 2 || cfg.Clusters[0].Name != "east" || cfg.Clusters[0].Context != "east-admin" || cfg.Clusters[0].Kubeconfig != "" ||
		cfg.Clusters[1].Kubeconfig != kc || cfg.Clusters[1].Context != "west-admin" {
		t.Errorf("clusters from flags: %+v", cfg.Clusters)
	}

	p := writeFile(t, `
resources:
- resource: pods
clusters:
- name: east
  kubeconfig: `+kc+`
  context: east-admin
- name: west
  kubeconfig: `+kc+`
  context: west-admin
  resources:
  - resource: pods
    namespaces: [team-a]
  - resource: services
`)
	cfg, err = parseConfig([]string{"--config", p}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	members, err := cfg.members(context.Background(), env(nil), quietLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 || len(members[0].cfg.Resources) != 1 || len(members[1].cfg.Resources) != 2 ||
		members[1].cfg.Resources[0].Namespaces[0] != "team-a" || members[0].rc.Host != "https://127.0.0.1:6443" {
		t.Errorf("members from the file: %+v", members)
	}
	// A single cluster configured the old way is no fleet.
	cfg, err = parseConfig([]string{"--kubeconfig", kc, "--context", "west-admin"}, env(nil), io.Discard)
	if err != nil || cfg.fleet() {
		t.Errorf("--kubeconfig and --context alone: fleet %t, %v", cfg.fleet(), err)
	}
}

// TestClusterErrorsStopStartup: bad cluster configuration is a clear error
// before anything starts.
func TestClusterErrorsStopStartup(t *testing.T) {
	kc := kubeconfig(t, "https://127.0.0.1:6443", "east-admin")
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	tests := []struct {
		name string
		args []string
		yaml string
		want []string
	}{
		{name: "duplicate names", args: []string{"--kubeconfig", kc, "--cluster", "name=east", "--cluster", "name=east"}, want: []string{`cluster "east" is configured twice`}},
		{name: "not a DNS label", args: []string{"--kubeconfig", kc, "--cluster", "name=East_1"}, want: []string{`cluster name "East_1"`}},
		{name: "missing kubeconfig", args: []string{"--cluster", "name=east,kubeconfig=" + missing}, want: []string{`cluster "east": kubeconfig`, "no such file"}},
		{name: "unknown context", args: []string{"--kubeconfig", kc, "--cluster", "name=east,context=nowhere"}, want: []string{`cluster "east"`, "nowhere"}},
		{name: "bad flag", args: []string{"--cluster", "east"}, want: []string{"--cluster", "name=NAME"}},
		{name: "unknown key", args: []string{"--cluster", "name=a,ctx=b"}, want: []string{`unknown key "ctx"`}},
		{name: "no name", args: []string{"--cluster", "context=b"}, want: []string{"no name="}},
		{name: "--context with clusters", args: []string{"--kubeconfig", kc, "--context", "east-admin", "--cluster", "name=east"}, want: []string{"--context"}},
		{name: "--demo with clusters", args: []string{"--demo", "--cluster", "name=east"}, want: []string{"--demo-clusters"}},
		{name: "--demo-clusters without --demo", args: []string{"--demo-clusters", "2"}, want: []string{"--demo-clusters needs --demo"}},
		{name: "--demo-clusters too many", args: []string{"--demo", "--demo-clusters", "99"}, want: []string{"--demo-clusters must be between 0 and 20"}},
		{name: "bad --fleet-ready", args: []string{"--fleet-ready", "most"}, want: []string{"--fleet-ready"}},
		{name: "flags and file", yaml: "clusters:\n- name: a\n  resources: [{resource: pods}]\n", args: []string{"--cluster", "name=b"}, want: []string{"use one"}},
		{name: "no resources anywhere", yaml: "clusters:\n- name: a\n", want: []string{`cluster "a": no resources configured`}},
		{name: "a cluster's bad resource", yaml: "resources: [{resource: pods}]\nclusters:\n- name: a\n  resources: [{resource: pods, labelSelector: 'app in ('}]\n", want: []string{`cluster "a"`, "labelSelector"}},
		{name: "unknown cluster field", yaml: "clusters:\n- name: a\n  server: x\n", want: []string{`unknown field "server"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.yaml != "" {
				args = append([]string{"--config", writeFile(t, tt.yaml)}, args...)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := run(ctx, append(args, "--listen", freeAddr(t)), env(nil), io.Discard)
			if err == nil {
				t.Fatal("expect an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestRunDemoFleet: --demo --demo-clusters 2 serves each simulated cluster
// under its prefix, lists both synced, and tells a cluster's path asked
// at the root where to ask.
func TestRunDemoFleet(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--demo", "--demo-clusters", "3", "--listen", addr}, env(nil), io.Discard)
	}()
	base := "http://" + addr
	// Three simulated clusters are generated before serving: longer than
	// one under the race detector on a busy machine.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the simulated fleet never became ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var list struct {
		Clusters []struct{ Name, State string }
	}
	getJSON(t, base+"/api/v1/clusters", &list)
	if len(list.Clusters) != 3 || list.Clusters[0].Name != "demo-1" || list.Clusters[1].State != "synced" {
		t.Errorf("/api/v1/clusters: %+v", list)
	}
	// demo-1 and demo-3 share a pod network, demo-2 has its own.
	podIPs := func(name string) map[string]bool {
		var pods struct {
			Items []struct{ Status struct{ PodIP string } }
		}
		getJSON(t, base+"/clusters/"+name+"/api/v1/pods?labelSelector=app", &pods)
		out := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.PodIP != "" && !strings.HasPrefix(p.Status.PodIP, "10.0.0.") { // not yet placed, or a node's
				out[p.Status.PodIP] = true
			}
		}
		return out
	}
	one, two, three := podIPs("demo-1"), podIPs("demo-2"), podIPs("demo-3")
	shared := 0
	for ip := range one {
		if three[ip] {
			shared++
		}
		if two[ip] {
			t.Errorf("%s is in demo-1 and demo-2, whose networks differ", ip)
		}
	}
	if shared == 0 {
		t.Error("demo-1 and demo-3 share no pod address: their networks do not overlap")
	}
	for ip := range two {
		if !strings.HasPrefix(ip, "10.242.") {
			t.Errorf("demo-2's pod address %s is outside 10.242.0.0/16", ip)
		}
	}
	for _, name := range []string{"demo-1", "demo-2"} {
		var pods struct {
			Kind  string
			Items []json.RawMessage
		}
		getJSON(t, base+"/clusters/"+name+"/k8s/api/v1/pods", &pods)
		if pods.Kind != "PodList" || len(pods.Items) == 0 {
			t.Errorf("%s's pods through /k8s: %s, %d items", name, pods.Kind, len(pods.Items))
		}
	}
	// The fleet's root answers a list across its clusters, each item in
	// its cluster's slot; a cluster's own paths are under its prefix.
	var across struct {
		Kind  string
		Items []struct {
			Cluster string
			Object  json.RawMessage
		}
	}
	getJSON(t, base+"/api/v1/pods?limit=1000", &across)
	seen := map[string]bool{}
	for _, it := range across.Items {
		seen[it.Cluster] = true
	}
	if across.Kind != "FleetList" || len(seen) != 3 {
		t.Errorf("/api/v1/pods at a fleet's root: %s with items of clusters %v; expect a FleetList over demo-1, demo-2 and demo-3", across.Kind, seen)
	}
	resp, err := http.Get(base + "/k8s/api/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/k8s/api/v1/pods at a fleet's root: %d; expect 404", resp.StatusCode)
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

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
