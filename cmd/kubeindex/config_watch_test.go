package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/demo"
)

// fakeAPIServer serves a simulated cluster (the demo's fake API server).
func fakeAPIServer(t *testing.T, seed int64) (*demo.TestCluster, string) {
	t.Helper()
	sim, err := demo.NewTest(demo.Options{Seed: seed, BookmarkInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return sim, srv.URL
}

// kubeconfigOf writes a kubeconfig with a context per name, each at its
// server.
func kubeconfigOf(t *testing.T, servers map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: t}\nclusters:\n")
	for name, url := range servers {
		fmt.Fprintf(&b, "- name: %s\n  cluster: {server: %q}\n", name, url)
	}
	b.WriteString("contexts:\n")
	for name := range servers {
		fmt.Fprintf(&b, "- name: %s\n  context: {cluster: %s, user: u}\n", name, name)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// configMapDir is a directory laid out as a Kubernetes ConfigMap volume:
// config.yaml is a symbolic link to ..data/config.yaml, and ..data one to
// the current version's directory, swapped by a rename on each update.
type configMapDir struct {
	dir     string
	version int
}

func (d *configMapDir) path() string { return filepath.Join(d.dir, "config.yaml") }

// publish writes a new version and swaps ..data to it, as the kubelet does.
func (d *configMapDir) publish(t *testing.T, body string) {
	t.Helper()
	d.version++
	v := fmt.Sprintf("..%d", d.version)
	if err := os.Mkdir(filepath.Join(d.dir, v), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, v, "config.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(v, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if d.version == 1 {
		if err := os.Symlink(filepath.Join("..data", "config.yaml"), d.path()); err != nil {
			t.Fatal(err)
		}
	}
}

// replace writes the file as editors do: a new file renamed over it.
func replace(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".swp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// fleetList is the part of GET /api/v1/clusters the test reads.
type fleetList struct {
	Clusters      []struct{ Name, State, Reason string }
	Configuration struct {
		File    string
		Watched bool
		Reloads int
		Error   string
	}
}

func (l fleetList) states() string {
	var out []string
	for _, c := range l.Clusters {
		out = append(out, c.Name+"="+c.State)
	}
	return strings.Join(out, ",")
}

// TestConfigFileWatched: the clusters of a watched configuration file
// follow its changes while serving (a ConfigMap's link swap, an editor's
// rename, a write in place): a cluster added starts, one changed
// restarts, one removed stops; an invalid file is reported and changes
// nothing; and a stream on a cluster left alone goes on throughout.
func TestConfigFileWatched(t *testing.T) {
	east, eastURL := fakeAPIServer(t, 1)
	_, westURL := fakeAPIServer(t, 2)
	_, northURL := fakeAPIServer(t, 3)
	kc := kubeconfigOf(t, map[string]string{"east": eastURL, "west": westURL, "north": northURL})
	file := func(clusters ...string) string {
		var b strings.Builder
		b.WriteString("resources:\n- resource: pods\nclusters:\n")
		for _, c := range clusters {
			name, extra, _ := strings.Cut(c, ":")
			fmt.Fprintf(&b, "- name: %s\n  kubeconfig: %s\n  context: %s\n", name, kc, name)
			if extra != "" {
				fmt.Fprintf(&b, "  resources: [{resource: pods, namespaces: [%s]}]\n", extra)
			}
		}
		return b.String()
	}
	cm := &configMapDir{dir: t.TempDir()}
	cm.publish(t, file("east", "west"))

	addr := freeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--config", cm.path(), "--listen", addr}, env(nil), io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after cancel: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not stop after cancel")
		}
	})
	list := func() fleetList {
		var l fleetList
		getJSON(t, base+"/api/v1/clusters", &l)
		return l
	}
	waitList := func(what string, cond func(fleetList) bool) fleetList {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			if resp, err := http.Get(base + "/readyz"); err == nil {
				resp.Body.Close()
				if l := list(); cond(l) {
					return l
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitList("east and west synced", func(l fleetList) bool { return l.states() == "east=synced,west=synced" })
	if l := list(); !l.Configuration.Watched || l.Configuration.File != cm.path() || l.Configuration.Reloads != 0 {
		t.Errorf("configuration at start: %+v", l.Configuration)
	}
	stream := openWatch(t, base+"/clusters/east/api/v1/pods?watch=true")

	// A ConfigMap update: north added, west's resources changed.
	cm.publish(t, file("east", "west:default", "north"))
	waitList("north added and west restarted", func(l fleetList) bool {
		return l.states() == "east=synced,west=synced,north=synced" && l.Configuration.Reloads == 1
	})
	var westNS struct{ Namespaces []string }
	getJSON(t, base+"/clusters/west/api/v1/resources/pods", &westNS)
	if len(westNS.Namespaces) != 1 || westNS.Namespaces[0] != "default" {
		t.Errorf("west's pods after the change: %+v; expect the namespace default only", westNS)
	}

	// An editor's rename: west removed.
	replace(t, cm.path(), file("east", "north"))
	// The count of reloads is made once the whole change is applied, after
	// the removed cluster leaves the list: wait for both.
	l := waitList("west removed", func(l fleetList) bool {
		return l.states() == "east=synced,north=synced" && l.Configuration.Reloads == 2
	})
	if l.Configuration.Error != "" {
		t.Errorf("after west's removal: %+v", l.Configuration)
	}
	if resp, err := http.Get(base + "/clusters/west/api/v1/pods"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a removed cluster: %v %v; expect 404", resp.Status, err)
	} else {
		resp.Body.Close()
	}

	// Written in place, invalid: refused and reported, nothing changes;
	// written back, the report is over.
	if err := os.WriteFile(cm.path(), []byte("clusters:\n- name: East_1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = waitList("the invalid file reported", func(l fleetList) bool { return l.Configuration.Error != "" })
	if !strings.Contains(l.Configuration.Error, "East_1") || l.states() != "east=synced,north=synced" || l.Configuration.Reloads != 2 {
		t.Errorf("after an invalid file: %+v %s", l.Configuration, l.states())
	}
	if m := metricsText(t, base); !strings.Contains(m, "kubeindex_config_last_reload_successful 0") || !strings.Contains(m, "kubeindex_config_reloads_total 2") {
		t.Errorf("/metrics does not say the file was refused after 2 reloads")
	}
	if err := os.WriteFile(cm.path(), []byte(file("east", "north")), 0o644); err != nil {
		t.Fatal(err)
	}
	l = waitList("the error over", func(l fleetList) bool { return l.Configuration.Error == "" })
	if l.states() != "east=synced,north=synced" || l.Configuration.Reloads != 2 {
		t.Errorf("the file back as it serves: %+v %s", l.Configuration, l.states())
	}

	// east's stream, opened before every change, follows changes still.
	if err := east.Apply(demo.Pods, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"after-the-changes","namespace":"default"},"spec":{"containers":[{"name":"c","image":"i"}]}}`)); err != nil {
		t.Fatal(err)
	}
	stream.waitFor(t, "after-the-changes")
}

// watchStream reads an event stream's lines on its own goroutine.
type watchStream struct{ lines chan string }

func openWatch(t *testing.T, url string) *watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream %s: %v %v", url, err, resp)
	}
	w := &watchStream{lines: make(chan string, 1<<14)}
	go func() {
		defer close(w.lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	return w
}

// waitFor reads until a line has want; it fails if the stream ends first.
func (w *watchStream) waitFor(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	var last string
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				t.Fatalf("the stream ended before %q; its last line: %s", want, last)
			}
			if line != "" {
				last = line
			}
			if strings.Contains(line, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no line with %q within 30s", want)
		}
	}
}

func metricsText(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
