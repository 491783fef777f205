package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestControllerRuntimeOverTLS runs controller-runtime, unchanged (the
// tools/ctrlrt module: a manager's cache with a typed Pod informer and a
// metadata-only one, as builder.OnlyMetadata makes it), against the API
// server and against kubeindex's /k8s served over HTTPS, with the CA in
// its kubeconfig and verification on. After churn, each cache holds what
// the API server lists (namespace, name, uid, resourceVersion, labels),
// and both processes saw the same events of the churned pods. The
// metadata-only informer must be answered metadata (the PartialObjectMetadata
// forms, and far fewer bytes than the typed one); a kubeconfig with another
// CA must not connect.
func TestControllerRuntimeOverTLS(t *testing.T) {
	c := cluster.StartForTest(t)
	bin, err := cluster.BuildCtrlrt(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ch := &churner{cs: cs, namespaces: seeded.Namespaces, nodes: []string{seeded.Nodes[0].Name, seeded.Nodes[1].Name}}
	ca := newE2ECA(t, "kubeindex-ctrlrt-ca")
	base := startTLSKubeindex(t, ca, "--kubeconfig", c.Kubeconfig, "--resources", "pods")
	crt, key := ca.issue(t, false, "ctrlrt")

	t.Run("WrongCA", func(t *testing.T) {
		other := newE2ECA(t, "another-ca")
		out, err := runCtrlrtOnce(t, bin, tlsKubeconfig(t, base+k8sPrefix, other.pem, crt, key))
		if err == nil || !strings.Contains(out, "certificate signed by unknown authority") {
			t.Fatalf("controller-runtime with a kubeconfig trusting another CA: %v\n%s\nwant a failure to verify kubeindex's certificate", err, out)
		}
	})

	api := startCtrlrt(t, bin, "API server", c.Kubeconfig)
	ki := startCtrlrt(t, bin, "kubeindex", tlsKubeconfig(t, base+k8sPrefix, ca.pem, crt, key))
	api.waitSynced()
	ki.waitSynced()
	ch.run(t, 30)

	list, err := cs.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := podsOf(list.Items)
	var bytes map[string]ctrlrtTraffic
	for _, p := range []*ctrlrtProcess{api, ki} {
		eventually(t, converge, p.name+"'s caches to hold the API server's pods", func() error {
			d := p.dump()
			for _, informer := range []string{"typed", "metadata"} {
				if diff := cmp.Diff(want, d.pods[informer], cmpopts.EquateEmpty()); diff != "" {
					return fmt.Errorf("%s informer (-API server's list +cache):\n%s", informer, diff)
				}
			}
			bytes = d.bytes
			return nil
		})
	}
	// A watch names only its stream's framing (as the API server's does,
	// whatever the items' form); a list names the form of its items.
	meta, typed := bytes["metadata"], bytes["typed"]
	for ct := range meta.ContentTypes {
		if !strings.Contains(ct, "as=PartialObjectMetadata") && !strings.Contains(ct, "stream=watch") {
			t.Errorf("kubeindex answered the metadata-only informer %q: not metadata (all: %v)", ct, meta.ContentTypes)
		}
	}
	apiBytes := api.dump().bytes
	t.Logf("bytes read by controller-runtime's pods informers through the sync and 30 churn steps: from kubeindex over TLS, metadata-only %d, typed %d (%.1f×); from the API server (managedFields included), metadata-only %d, typed %d; kubeindex's answers %v and %v",
		meta.Bytes, typed.Bytes, float64(typed.Bytes)/float64(max(meta.Bytes, 1)), apiBytes["metadata"].Bytes, apiBytes["typed"].Bytes, meta.ContentTypes, typed.ContentTypes)
	if meta.Bytes == 0 || meta.Bytes*2 > typed.Bytes {
		t.Errorf("the metadata-only informer read %d bytes from kubeindex, the typed one %d: not metadata only", meta.Bytes, typed.Bytes)
	}
	eventually(t, converge, "the same events of the churned pods", func() error {
		a, k := api.churnEvents(ch), ki.churnEvents(ch)
		// Each step creates a pod, relabels one and deletes one: at least
		// 30 adds, 29 updates and 27 deletes per informer.
		for _, informer := range []string{"typed", "metadata"} {
			if len(a[informer]) < 86 {
				return fmt.Errorf("the %s informer on the API server handed over %d events of churned pods: %q", informer, len(a[informer]), a[informer])
			}
		}
		if diff := cmp.Diff(a, k); diff != "" {
			return fmt.Errorf("events (-through the API server +through kubeindex):\n%s", diff)
		}
		return nil
	})
	for _, e := range ki.allEvents() {
		if wantType := map[string]string{"typed": "*v1.Pod", "metadata": "*v1.PartialObjectMetadata"}[e.Informer]; e.GoType != wantType {
			t.Fatalf("the %s informer handed its handler a %s, want %s", e.Informer, e.GoType, wantType)
		}
	}
}

// podsOf is what the clients' tools write of pods, sorted as they sort
// them; compare with cmpopts.EquateEmpty (no labels may be written as {}).
func podsOf(items []corev1.Pod) []ctrlrtPod {
	var out []ctrlrtPod
	for i := range items {
		p := &items[i]
		out = append(out, ctrlrtPod{p.Namespace, p.Name, string(p.UID), p.ResourceVersion, p.Labels})
	}
	slices.SortFunc(out, func(a, b ctrlrtPod) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out
}

// ctrlrtPod and ctrlrtLine are tools/ctrlrt's output.
type ctrlrtPod struct {
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Labels          map[string]string `json:"labels,omitempty"`
}

type ctrlrtTraffic struct {
	Requests     int            `json:"requests"`
	Bytes        int64          `json:"bytes"`
	ContentTypes map[string]int `json:"contentTypes"`
}

type ctrlrtLine struct {
	Synced   bool                     `json:"synced"`
	Informer string                   `json:"informer"`
	Event    string                   `json:"event"`
	GoType   string                   `json:"goType"`
	Pod      *ctrlrtPod               `json:"pod"`
	Pods     []ctrlrtPod              `json:"pods"`
	Bytes    map[string]ctrlrtTraffic `json:"bytes"`
}

// ctrlrtProcess is one running tools/ctrlrt.
type ctrlrtProcess struct {
	t      *testing.T
	name   string
	stdin  io.WriteCloser
	stderr *lockedBuffer
	synced chan struct{}
	dumps  chan ctrlrtLine

	mu     sync.Mutex
	events []ctrlrtLine
}

func startCtrlrt(t *testing.T, bin, name, kubeconfig string) *ctrlrtProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-kubeconfig", kubeconfig)
	p := &ctrlrtProcess{t: t, name: name, stderr: &lockedBuffer{}, synced: make(chan struct{}), dumps: make(chan ctrlrtLine, 3)}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var l ctrlrtLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Errorf("%s: ctrlrt wrote %q: %v", name, sc.Text(), err)
				continue
			}
			switch {
			case l.Synced:
				close(p.synced)
			case l.Event != "":
				p.mu.Lock()
				p.events = append(p.events, l)
				p.mu.Unlock()
			default:
				p.dumps <- l
			}
		}
	}()
	t.Cleanup(func() {
		p.stdin.Close() // ctrlrt exits when its stdin closes
		select {
		case <-done:
		case <-time.After(stopTimeout):
		}
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s: ctrlrt's stderr:\n%s", name, tail(p.stderr.String(), 40))
		}
	})
	return p
}

func (p *ctrlrtProcess) waitSynced() {
	p.t.Helper()
	select {
	case <-p.synced:
	case <-time.After(readyTimeout):
		p.t.Fatalf("%s: controller-runtime's caches did not sync in %v:\n%s", p.name, readyTimeout, tail(p.stderr.String(), 40))
	}
}

type ctrlrtDump struct {
	pods  map[string][]ctrlrtPod
	bytes map[string]ctrlrtTraffic
}

// dump asks what each cache holds and what was read so far.
func (p *ctrlrtProcess) dump() ctrlrtDump {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, "dump\n"); err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	d := ctrlrtDump{pods: map[string][]ctrlrtPod{}}
	for range 3 {
		select {
		case l := <-p.dumps:
			if l.Bytes != nil {
				d.bytes = l.Bytes
			} else {
				d.pods[l.Informer] = l.Pods
			}
		case <-time.After(converge):
			p.t.Fatalf("%s: no dump in %v:\n%s", p.name, converge, tail(p.stderr.String(), 40))
		}
	}
	return d
}

func (p *ctrlrtProcess) allEvents() []ctrlrtLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// churnEvents are the events of ch's pods, per informer, in the order
// each informer handed them over. Other tests' churners leave pods of the
// same names in their own namespaces, which the first sync lists.
func (p *ctrlrtProcess) churnEvents(ch *churner) map[string][]string {
	out := map[string][]string{}
	for _, e := range p.allEvents() {
		if e.Pod != nil && ch.owns(e.Pod.Namespace, e.Pod.Name) {
			out[e.Informer] = append(out[e.Informer], fmt.Sprintf("%s %s/%s rv=%s uid=%s", e.Event, e.Pod.Namespace, e.Pod.Name, e.Pod.ResourceVersion, e.Pod.UID))
		}
	}
	return out
}

// runCtrlrtOnce runs tools/ctrlrt until its caches sync or it gives up,
// returning its output.
func runCtrlrtOnce(t *testing.T, bin, kubeconfig string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), converge)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-kubeconfig", kubeconfig, "-sync-timeout", "10s")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// owns reports whether the pod namespace/name is one c makes.
func (c *churner) owns(namespace, name string) bool {
	return slices.Contains(c.namespaces, namespace) && strings.HasPrefix(name, "churn-")
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
