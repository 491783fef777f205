package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestJSClientOverTLS runs the official JavaScript client
// (@kubernetes/client-node 1.x, pinned by test/js/package-lock.json),
// unchanged, against kubeindex's /k8s served over HTTPS with the CA in its
// kubeconfig and verification on, authenticated by a client certificate:
// its list and get equal the API server's, and its informer (makeInformer:
// list then watch) holds what the API server lists after churn, having
// handed on each event of the churned pods. With a kubeconfig trusting
// another CA it refuses kubeindex. Skipped only where node or npm is
// missing (.ci/run installs them).
func TestJSClientOverTLS(t *testing.T) {
	c := cluster.StartForTest(t)
	node, npm := jsTools(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ch := &churner{cs: cs, namespaces: seeded.Namespaces, nodes: []string{seeded.Nodes[0].Name, seeded.Nodes[1].Name}}
	ca := newE2ECA(t, "kubeindex-js-ca")
	base := startTLSKubeindex(t, ca, "--kubeconfig", c.Kubeconfig, "--resources", "pods")
	crt, key := ca.issue(t, false, "js-reader")
	dir := jsModules(t, npm)

	t.Run("WrongCA", func(t *testing.T) {
		other := newE2ECA(t, "another-ca")
		ctx, cancel := context.WithTimeout(t.Context(), converge)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "pods.mjs", tlsKubeconfig(t, base+k8sPrefix, other.pem, crt, key))
		cmd.Dir, cmd.Stdin = dir, strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "UNABLE_TO_VERIFY_LEAF_SIGNATURE") {
			t.Fatalf("the JavaScript client with a kubeconfig trusting another CA: %v\n%s\nwant a failure to verify kubeindex's certificate", err, out)
		}
	})

	apiPods := func() []ctrlrtPod {
		t.Helper()
		list, err := cs.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return podsOf(list.Items)
	}
	// The same client on the API server: the events to expect.
	api := startJSClient(t, node, dir, "API server", c.Kubeconfig)
	js := startJSClient(t, node, dir, "kubeindex", tlsKubeconfig(t, base+k8sPrefix, ca.pem, crt, key))
	want := apiPods()
	var listed []ctrlrtPod
	if err := json.Unmarshal(js.next("list")["list"], &listed); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, listed, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("listPodForAllNamespaces through kubeindex (-API server +kubeindex):\n%s", d)
	}
	got := js.next("get")
	var one ctrlrtPod
	if err := json.Unmarshal(got["get"], &one); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(want, func(p ctrlrtPod) bool { return p.Namespace == one.Namespace && p.Name == one.Name }); i < 0 || !cmp.Equal(want[i], one, cmpopts.EquateEmpty()) {
		t.Fatalf("readNamespacedPod through kubeindex: %+v; the API server's list has %+v", one, want)
	}
	if string(got["kind"]) != `"Pod"` || string(got["apiVersion"]) != `"v1"` {
		t.Fatalf("readNamespacedPod: kind %s apiVersion %s", got["kind"], got["apiVersion"])
	}
	js.next("synced")
	api.next("list")
	api.next("get")
	api.next("synced")

	ch.run(t, 10)
	want = apiPods()
	eventually(t, converge, "the informer to hold the API server's pods", func() error {
		var cached []ctrlrtPod
		if err := json.Unmarshal(js.dump()["cache"], &cached); err != nil {
			return err
		}
		if d := cmp.Diff(want, cached, cmpopts.EquateEmpty()); d != "" {
			return fmt.Errorf("the informer's cache (-API server +informer):\n%s", d)
		}
		return nil
	})
	eventually(t, converge, "the informer to hand on the churned pods' events as it does from the API server", func() error {
		a, k := api.churnEvents(t, ch), js.churnEvents(t, ch)
		// Step i created churn-i, relabelled churn-(i-1) and deleted
		// churn-(i-3): at least 10 adds, 9 updates and 7 deletes.
		if len(a) < 26 {
			return fmt.Errorf("from the API server, %d events of churned pods: %q", len(a), a)
		}
		if d := cmp.Diff(a, k); d != "" {
			return fmt.Errorf("events (-from the API server +from kubeindex):\n%s", d)
		}
		return nil
	})
}

// jsTools finds node and npm, skipping the test where either is missing
// (never in CI: .ci/run installs them).
func jsTools(t *testing.T) (node, npm string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node and npm are needed in CI: .ci/run installs them (apt-get install nodejs npm)")
		}
		t.Skip("node and npm are needed to run the JavaScript client (apt-get install nodejs npm)")
	}
	return node, npm
}

// jsModules installs test/js's dependencies from its lockfile (npm ci)
// when node_modules is missing or older than the lockfile (npm's record of
// what it installed, node_modules/.package-lock.json, predates it), and
// returns test/js.
func jsModules(t *testing.T, npm string) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "test", "js")
	lock, errLock := os.Stat(filepath.Join(dir, "package-lock.json"))
	if errLock != nil {
		t.Fatal(errLock)
	}
	if installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil && !installed.ModTime().Before(lock.ModTime()) {
		return dir
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return dir
}

// jsClient is one running test/js/pods.mjs.
type jsClient struct {
	t      *testing.T
	name   string
	stdin  io.WriteCloser
	stderr *lockedBuffer
	lines  chan map[string]json.RawMessage

	mu  sync.Mutex
	evs [][]byte // the event lines
}

func startJSClient(t *testing.T, node, dir, name, kubeconfig string) *jsClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "pods.mjs", kubeconfig)
	cmd.Dir = dir
	j := &jsClient{t: t, name: name, stderr: &lockedBuffer{}, lines: make(chan map[string]json.RawMessage, 16)}
	cmd.Stderr = j.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if j.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(j.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var l map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Errorf("%s: pods.mjs wrote %q: %v", name, sc.Text(), err)
				continue
			}
			if _, ok := l["event"]; ok {
				j.mu.Lock()
				j.evs = append(j.evs, slices.Clone(sc.Bytes()))
				j.mu.Unlock()
				continue
			}
			j.lines <- l
		}
	}()
	t.Cleanup(func() {
		j.stdin.Close() // pods.mjs exits when its stdin closes
		select {
		case <-done:
		case <-time.After(stopTimeout):
		}
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s: pods.mjs's stderr:\n%s", name, tail(j.stderr.String(), 40))
		}
	})
	return j
}

// next is the next line, which must carry key.
func (j *jsClient) next(key string) map[string]json.RawMessage {
	j.t.Helper()
	select {
	case l, ok := <-j.lines:
		if !ok {
			j.t.Fatalf("%s: pods.mjs ended before writing %q:\n%s", j.name, key, tail(j.stderr.String(), 40))
		}
		if _, ok := l[key]; !ok {
			j.t.Fatalf("%s: pods.mjs wrote %v, want a line with %q", j.name, l, key)
		}
		return l
	case <-time.After(converge):
		j.t.Fatalf("%s: pods.mjs wrote no %q in %v:\n%s", j.name, key, converge, tail(j.stderr.String(), 40))
	}
	return nil
}

func (j *jsClient) dump() map[string]json.RawMessage {
	j.t.Helper()
	if _, err := io.WriteString(j.stdin, "dump\n"); err != nil {
		j.t.Fatal(err)
	}
	return j.next("cache")
}

// churnEvents are the events of ch's pods the informer handed on, in
// order.
func (j *jsClient) churnEvents(t *testing.T, ch *churner) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, l := range j.evs {
		var e struct {
			Event string    `json:"event"`
			Pod   ctrlrtPod `json:"pod"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		if ch.owns(e.Pod.Namespace, e.Pod.Name) {
			out = append(out, fmt.Sprintf("%s %s/%s rv=%s uid=%s", e.Event, e.Pod.Namespace, e.Pod.Name, e.Pod.ResourceVersion, e.Pod.UID))
		}
	}
	return out
}
