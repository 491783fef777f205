package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// windowsNS holds the pods TestWindowAgreesWithAPIServer watches.
const windowsNS = "windows"

// windowClient holds a live window as a dashboard does, from its
// messages (docs/streams.md, "Live windows").
type windowClient struct {
	mu     sync.Mutex
	rows   []json.RawMessage
	total  int
	counts json.RawMessage
	err    error
}

func (c *windowClient) read(conn *websocket.Conn) {
	for {
		_, msg, err := conn.ReadMessage()
		c.mu.Lock()
		if err != nil {
			c.err = err
			c.mu.Unlock()
			return
		}
		c.apply(msg)
		c.mu.Unlock()
	}
}

func (c *windowClient) apply(msg []byte) {
	var m struct {
		Type   string            `json:"type"`
		Total  int               `json:"total"`
		Rows   []json.RawMessage `json:"rows"`
		Counts json.RawMessage   `json:"counts"`
		Ops    []struct {
			Op           string
			At, From, To int
			Row          json.RawMessage
		} `json:"ops"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		c.err = err
		return
	}
	switch m.Type {
	case "WINDOW":
		c.rows = m.Rows
	case "WINDOW_CHANGES":
		for _, op := range m.Ops {
			switch op.Op {
			case "remove":
				c.rows = slices.Delete(c.rows, op.At, op.At+1)
			case "insert":
				c.rows = slices.Insert(c.rows, op.At, op.Row)
			case "update":
				c.rows[op.At] = op.Row
			case "move":
				c.rows = slices.Insert(slices.Delete(c.rows, op.From, op.From+1), op.To, op.Row)
			}
		}
	default:
		c.err = fmt.Errorf("unexpected message %s", msg)
		return
	}
	c.total = m.Total
	if m.Counts != nil {
		c.counts = m.Counts
	}
}

// state is the window as "name@resourceVersion" rows, its total and its
// counts as "phase=count".
func (c *windowClient) state() ([]string, int, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rows []string
	for _, r := range c.rows {
		var o corev1.Pod
		json.Unmarshal(r, &o)
		rows = append(rows, o.Name+"@"+o.ResourceVersion)
	}
	var counts struct {
		Groups []struct {
			Values []string
			Count  int
		}
	}
	json.Unmarshal(c.counts, &counts)
	var groups []string
	for _, g := range counts.Groups {
		groups = append(groups, fmt.Sprintf("%s=%d", g.Values[0], g.Count))
	}
	slices.Sort(groups)
	return rows, c.total, groups, c.err
}

func windowPod(t *testing.T, cs *kubernetes.Clientset, name string, restarts int32, phase corev1.PodPhase) {
	t.Helper()
	ctx := t.Context()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: windowsNS},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
	created, err := cs.CoreV1().Pods(windowsNS).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setRestarts(t, cs, created, restarts, phase)
}

func setRestarts(t *testing.T, cs *kubernetes.Clientset, p *corev1.Pod, restarts int32, phase corev1.PodPhase) {
	t.Helper()
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "registry.example/app:1", Ready: true, RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: p.CreationTimestamp}}}}
	if _, err := cs.CoreV1().Pods(windowsNS).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestWindowAgreesWithAPIServer opens a live window over pods on the
// multiplexed socket while pods are created, changed and deleted on a
// real API server; the rows it keeps (each at the API server's
// resourceVersion), its total and its counts become the same question
// computed over the API server's own list.
func TestWindowAgreesWithAPIServer(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: windowsNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), windowsNS, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().ServiceAccounts(windowsNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		windowPod(t, cs, fmt.Sprintf("w-%02d", i), int32(i*5%7), questionPhases[i%4])
	}
	k := startKubeindex(t, "--kubeconfig", c.Kubeconfig, "--window-rate", "20")
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(k.URL, "http")+"/api/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const offset, limit = 2, 6
	if err := conn.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"op":"window","id":"w","resource":"pods","namespace":%q,`+
		`"filter":["status.phase!=Failed"],"sort":"-restarts","offset":%d,"limit":%d,"groupBy":"status.phase","fields":"status.phase"}`,
		windowsNS, offset, limit)); err != nil {
		t.Fatal(err)
	}
	var client windowClient
	go client.read(conn)
	// The same question without counts, its namespace a filter rather
	// than a selection: over the whole resource, its view follows the
	// ordered index of its sort instead of holding its rows.
	conn2, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(k.URL, "http")+"/api/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if err := conn2.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"op":"window","id":"w","resource":"pods",`+
		`"filter":["metadata.namespace=%s","status.phase!=Failed"],"sort":"-restarts","offset":%d,"limit":%d,"fields":"status.phase"}`,
		windowsNS, offset, limit)); err != nil {
		t.Fatal(err)
	}
	var following windowClient
	go following.read(conn2)

	// The question over the API server's list.
	expect := func() ([]string, int, []string) {
		l, err := cs.CoreV1().Pods(windowsNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods := slices.DeleteFunc(l.Items, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		slices.SortFunc(pods, func(a, b corev1.Pod) int {
			return cmp.Or(cmp.Compare(restarts(b), restarts(a)), strings.Compare(a.Name, b.Name))
		})
		phases := map[corev1.PodPhase]int{}
		for _, p := range pods {
			phases[p.Status.Phase]++
		}
		var groups []string
		for ph, n := range phases {
			groups = append(groups, fmt.Sprintf("%s=%d", ph, n))
		}
		slices.Sort(groups)
		var rows []string
		for _, p := range pods[min(offset, len(pods)):min(offset+limit, len(pods))] {
			rows = append(rows, p.Name+"@"+p.ResourceVersion)
		}
		return rows, len(pods), groups
	}
	agree := func(what string) {
		t.Helper()
		eventually(t, converge, what, func() error {
			rows, total, groups, err := client.state()
			if err != nil {
				return err
			}
			wRows, wTotal, wGroups := expect()
			if !slices.Equal(rows, wRows) || total != wTotal || !slices.Equal(groups, wGroups) {
				return fmt.Errorf("window %v total %d counts %v; the API server's %v total %d counts %v", rows, total, groups, wRows, wTotal, wGroups)
			}
			rows, total, groups, err = following.state()
			if err != nil {
				return err
			}
			if !slices.Equal(rows, wRows) || total != wTotal || len(groups) > 0 {
				return fmt.Errorf("window without counts %v total %d counts %v; the API server's %v total %d", rows, total, groups, wRows, wTotal)
			}
			return nil
		})
	}
	agree("the window is the API server's answer")

	for i := range 4 {
		windowPod(t, cs, fmt.Sprintf("new-%d", i), int32(10+i), corev1.PodRunning) // new, among the first
	}
	for i := range 4 {
		p, err := cs.CoreV1().Pods(windowsNS).Get(ctx, fmt.Sprintf("w-%02d", i*3), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setRestarts(t, cs, p, int32(20-i*4), questionPhases[(i+1)%4]) // moved, some into Failed (out)
	}
	for _, name := range []string{"w-01", "w-05", "new-2"} {
		if err := cs.CoreV1().Pods(windowsNS).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	agree("the window follows creates, changes and deletes")
}
