package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// questionsNS holds the pods TestQuestionsAgreeWithAPIServer asks about.
const questionsNS = "questions"

var questionPhases = []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodFailed, corev1.PodSucceeded}

// questionPod creates pod i: its app label, node, phase and restarts
// follow from i, set as a scheduler and a kubelet would set them.
func questionPod(t *testing.T, cs *kubernetes.Clientset, name string, i int) {
	t.Helper()
	ctx := t.Context()
	containers := []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}
	if i%2 == 0 {
		containers = append(containers, corev1.Container{Name: "sidecar", Image: "registry.example/sidecar:1"})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: questionsNS,
			Labels: map[string]string{"app": []string{"web", "db", "cache"}[i%3]}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprint("node-", i%4), Containers: containers},
	}
	created, err := cs.CoreV1().Pods(questionsNS).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Phase = questionPhases[(i/3)%4]
	for j, c := range containers {
		// the first container runs and is ready, a sidecar is still waiting
		state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created.CreationTimestamp}}
		if j > 0 {
			state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		}
		created.Status.ContainerStatuses = append(created.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: j == 0, RestartCount: int32((i*7 + j*3) % 11), State: state})
	}
	if _, err := cs.CoreV1().Pods(questionsNS).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func restarts(p corev1.Pod) int {
	n := 0
	for _, s := range p.Status.ContainerStatuses {
		n += int(s.RestartCount)
	}
	return n
}

// apiPods is the namespace's pods as the API server lists them.
func apiPods(t *testing.T, cs *kubernetes.Clientset) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(questionsNS).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// question is one question and the oracle's answer, computed from the
// API server's own list.
type question struct {
	params url.Values
	keep   func(p corev1.Pod) bool
	order  func(a, b corev1.Pod) int // before namespace/name
}

func (q question) expect(pods []corev1.Pod) []string {
	pods = slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool { return !q.keep(p) })
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return cmp.Or(q.order(a, b), strings.Compare(a.Name, b.Name)) })
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// walk pages through a question, limit at a time, calling between after
// the first page; it returns the names and checks every page's total.
func walk(t *testing.T, k *kubeindex, q url.Values, limit, total int, between func()) []string {
	t.Helper()
	q = maps(q)
	q.Set("namespace", questionsNS)
	q.Set("limit", fmt.Sprint(limit))
	var names []string
	for page := 0; ; page++ {
		var l struct {
			Metadata struct {
				Continue string `json:"continue"`
				Total    int    `json:"totalItemCount"`
			} `json:"metadata"`
			Items []struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			} `json:"items"`
		}
		if err := k.getJSON("/api/v1/pods?"+q.Encode(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Metadata.Total != total {
			t.Fatalf("page %d of %v: totalItemCount %d; expect %d", page, q, l.Metadata.Total, total)
		}
		for _, it := range l.Items {
			names = append(names, it.Metadata.Name)
		}
		if l.Metadata.Continue == "" {
			return names
		}
		if page == 0 && between != nil {
			between()
		}
		q.Set("continue", l.Metadata.Continue)
	}
}

func maps(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// TestQuestionsAgreeWithAPIServer asks kubeindex questions (filter, sort,
// pages, counts) about pods whose phases, labels, nodes and restarts
// vary, and compares each answer with the same question computed over the
// API server's own list; then changes the pods in the middle of a walk.
func TestQuestionsAgreeWithAPIServer(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: questionsNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), questionsNS, metav1.DeleteOptions{}) })
	// no controller manager makes it: the ServiceAccount admission asks for it
	if _, err := cs.CoreV1().ServiceAccounts(questionsNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 48 {
		questionPod(t, cs, fmt.Sprintf("q-%02d", i), i)
	}
	k := startKubeindex(t, "--kubeconfig", c.Kubeconfig)
	api := newAPIServer(t, c)
	synced := func() {
		eventually(t, converge, "kubeindex has the namespace's pods", func() error {
			return sameList(ctx, k, api, podsR, questionsNS, url.Values{"namespace": {questionsNS}}, nil)
		})
	}
	synced()
	pods := apiPods(t, cs)

	questions := []question{
		{params: url.Values{"sort": {"-restarts"}},
			keep:  func(corev1.Pod) bool { return true },
			order: func(a, b corev1.Pod) int { return cmp.Compare(restarts(b), restarts(a)) }},
		{params: url.Values{"filter": {"status.phase in (Running,Pending)", "metadata.labels.app!=db"}, "sort": {"node,-restarts"}},
			keep: func(p corev1.Pod) bool {
				return (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending) && p.Labels["app"] != "db"
			},
			order: func(a, b corev1.Pod) int {
				return cmp.Or(strings.Compare(a.Spec.NodeName, b.Spec.NodeName), cmp.Compare(restarts(b), restarts(a)))
			}},
		{params: url.Values{"filter": {"restarts>=5,status.phase=Failed"}, "sort": {"-ready,status.containerStatuses.0.restartCount"}},
			keep: func(p corev1.Pod) bool { return restarts(p) >= 5 || p.Status.Phase == corev1.PodFailed },
			order: func(a, b corev1.Pod) int {
				ready := func(p corev1.Pod) float64 { return 1 / float64(len(p.Spec.Containers)) } // the first container is ready
				return cmp.Or(cmp.Compare(ready(b), ready(a)),
					cmp.Compare(a.Status.ContainerStatuses[0].RestartCount, b.Status.ContainerStatuses[0].RestartCount))
			}},
		{params: url.Values{"filter": {"spec.containers.#.image~SIDECAR"}},
			keep:  func(p corev1.Pod) bool { return len(p.Spec.Containers) == 2 },
			order: func(a, b corev1.Pod) int { return 0 }},
	}
	for _, q := range questions {
		expect := q.expect(pods)
		for _, limit := range []int{5, 100} {
			if got := walk(t, k, q.params, limit, len(expect), nil); !slices.Equal(got, expect) {
				t.Errorf("%v, pages of %d:\n got    %v\n expect %v", q.params, limit, got, expect)
			}
		}
	}

	// Counts per phase and node, with a filter, against the API server's.
	var counts struct {
		Total  int `json:"total"`
		Groups []struct {
			Values []any `json:"values"`
			Count  int   `json:"count"`
		} `json:"groups"`
	}
	if err := k.getJSON("/api/v1/resources/pods/counts?namespace="+questionsNS+"&groupBy=status.phase,node&filter=metadata.labels.app!=web", &counts); err != nil {
		t.Fatal(err)
	}
	expectGroups, got := map[string]int{}, map[string]int{}
	expectTotal := 0
	for _, p := range pods {
		if p.Labels["app"] != "web" {
			expectGroups[string(p.Status.Phase)+"/"+p.Spec.NodeName]++
			expectTotal++
		}
	}
	for _, g := range counts.Groups {
		got[fmt.Sprintf("%v/%v", g.Values[0], g.Values[1])] += g.Count
	}
	if counts.Total != expectTotal || fmt.Sprint(got) != fmt.Sprint(expectGroups) {
		t.Errorf("counts: %d %v; expect %d %v", counts.Total, got, expectTotal, expectGroups)
	}

	// A walk is one moment: change pods after its first page; it still
	// answers the pods as they were, and a new walk sees them as they are.
	byRestarts := questions[0]
	before := byRestarts.expect(pods)
	walked := walk(t, k, byRestarts.params, 10, len(before), func() {
		last := before[len(before)-1]
		if err := cs.CoreV1().Pods(questionsNS).Delete(ctx, last, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		questionPod(t, cs, "q-new", 7) // 7*7 % 11 = 5 restarts: in the middle
		p, err := cs.CoreV1().Pods(questionsNS).Get(ctx, before[len(before)-2], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.ContainerStatuses[0].RestartCount = 50 // would come first
		if _, err := cs.CoreV1().Pods(questionsNS).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synced()
	})
	if !slices.Equal(walked, before) {
		t.Errorf("a walk with changes between its pages:\n got    %v\n expect %v (as at its first page)", walked, before)
	}
	after := byRestarts.expect(apiPods(t, cs))
	if got := walk(t, k, byRestarts.params, 10, len(after), nil); !slices.Equal(got, after) {
		t.Errorf("a new walk after the changes:\n got    %v\n expect %v", got, after)
	}
}
