package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestKubectl runs the same kubectl commands against the API server and
// against kubeindex's Kubernetes API, on the same cluster state, and
// requires the same output, less the columns that tell the time of the run.
// It proves discovery (kubectl finds every resource, short name and
// category through it), lists with selectors and chunks, Table output with
// the API server's columns (a CRD's printer columns too), objects as JSON
// and YAML, watches, and the refusal of writes.
func TestKubectl(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ns := seeded.Namespaces[0]
	createStatefulSetAndCronJob(t, cs, ns)
	k := startKubeAPIKubeindex(t, c.Kubeconfig)
	p := kubectlPair{
		api: newKubectl(t, "API server", c.Kubeconfig),
		ki:  newKubectl(t, "kubeindex", kubeconfigFor(t, k.URL+k8sPrefix)),
	}
	node := seeded.Nodes[0].Name

	for _, tc := range []struct {
		name string
		args []string
		norm func(string) string
	}{
		{"get pods -A", []string{"get", "pods", "-A"}, tableCells},
		{"get pods -o wide", []string{"get", "pods", "-A", "-o", "wide"}, tableCells},
		// kubectl prints a list as a "List" it composes itself, with an
		// empty resourceVersion, so no list metadata can differ; objects are
		// printed without managedFields (--show-managed-fields=false), which
		// kubeindex strips. Nothing in them depends on the time of the run.
		{"get pods -o json", []string{"get", "pods", "-A", "-o", "json"}, asIs},
		{"get pods -o yaml", []string{"get", "pods", "-A", "-o", "yaml"}, asIs},
		{"get pod -o json", []string{"get", "pod", "-n", ns, seeded.Pods[0].Name, "-o", "json"}, asIs},
		{"get -l", []string{"get", "pods", "-A", "-l", "app=web"}, tableCells},
		{"get -l set-based", []string{"get", "pods", "-A", "-l", "app in (api,report),app!=web"}, tableCells},
		{"field selector spec.nodeName", []string{"get", "pods", "-A", "--field-selector", "spec.nodeName=" + node}, tableCells},
		{"field selector status.phase!=Running", []string{"get", "pods", "-A", "--field-selector", "status.phase!=Running"}, tableCells},
		{"chunk-size 7", []string{"get", "pods", "-A", "--chunk-size=7"}, tableCells},
		{"get all -A", []string{"get", "all", "-A"}, tableCells},
		{"get all -n", []string{"get", "all", "-n", ns, "-o", "wide"}, tableCells},
		{"get CRD printer columns", []string{"get", "widgets", "-A"}, tableCells},
		{"get CRD by short name", []string{"get", "wd", "-n", ns, "-o", "wide"}, tableCells},
		{"CRD selectable field", []string{"get", "widgets", "-A", "--field-selector", "spec.color=red"}, tableCells},
		{"CRD selectable fields, negated", []string{"get", "widgets", "-A", "--field-selector", "spec.color!=red,spec.size!=3"}, tableCells},
		{"get CRD as yaml", []string{"get", "widgets.example.com", "-n", ns, "-o", "yaml"}, asIs},
		{"get nodes", []string{"get", "nodes", "-o", "wide"}, tableCells},
		{"get deployments", []string{"get", "deploy", "-A", "-o", "wide"}, tableCells},
		{"get one pod", []string{"get", "pod", "-n", ns, seeded.Pods[0].Name}, tableCells},
		{"describe pod", []string{"describe", "pod", "-n", ns, seeded.Pods[0].Name}, asIs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.same(t, tc.norm, tc.args...)
		})
	}

	t.Run("a field the CRD does not select on is refused as the API server refuses it", func(t *testing.T) {
		args := []string{"get", "widgets", "-A", "--field-selector", "spec.tags=a"}
		_, apiErr, err := p.api.run(args...)
		if err == nil {
			t.Fatal("the API server accepted a field the CRD does not declare")
		}
		_, kiErr, err := p.ki.run(args...)
		if err == nil || kiErr != apiErr {
			t.Errorf("kubeindex: %v %q; the API server said %q", err, kiErr, apiErr)
		}
	})

	t.Run("chunks are what the API server pages", func(t *testing.T) {
		// The same output paged by 7 or not at all: a wrong continue token
		// (a skipped or repeated page) shows here even if both sides agree.
		whole := p.same(t, tableCells, "get", "pods", "-A")
		chunked, _, err := p.ki.run("get", "pods", "-A", "--chunk-size=7")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(strings.Split(whole, "\n"), strings.Split(tableCells(chunked), "\n")); d != "" {
			t.Errorf("kubeindex's pods in chunks of 7 differ from the API server's unchunked list:\n%s", d)
		}
		if n := strings.Count(whole, "\n"); n <= 7 {
			t.Fatalf("only %d pods: chunks of 7 prove nothing", n)
		}
	})

	t.Run("resourceVersion=0 is one page whatever the limit", func(t *testing.T) {
		// The API server answers resourceVersion=0 from its watch cache,
		// which ignores limit: an informer's first list is one request.
		// Without resourceVersion, limit pages as before.
		pages := func(c *kubectlCmd, path string) (items int, cont string) {
			out, errOut, err := c.run("get", "--raw", path)
			if err != nil {
				t.Fatalf("get --raw %s: %v %s", path, err, errOut)
			}
			var l struct {
				Metadata struct{ Continue string } `json:"metadata"`
				Items    []json.RawMessage         `json:"items"`
			}
			if err := json.Unmarshal([]byte(out), &l); err != nil {
				t.Fatalf("get --raw %s: %v", path, err)
			}
			return len(l.Items), l.Metadata.Continue
		}
		for _, path := range []string{"/api/v1/pods?limit=3&resourceVersion=0", "/api/v1/pods?limit=3"} {
			apiItems, apiCont := pages(p.api, path)
			kiItems, kiCont := pages(p.ki, path)
			if apiItems <= 3 && strings.Contains(path, "resourceVersion=0") {
				t.Fatalf("the API server gave %d pods at %s: too few to tell", apiItems, path)
			}
			if (apiCont == "") != (kiCont == "") || (apiCont == "" && apiItems != kiItems) || (apiCont != "" && kiItems != 3) {
				t.Errorf("%s: kubeindex gave %d items (continue %q), the API server %d (continue %q)", path, kiItems, kiCont, apiItems, apiCont)
			}
		}
	})

	t.Run("api-resources", func(t *testing.T) {
		eventually(t, converge, "kubectl api-resources", func() error {
			apiOut, _, err := p.api.run("api-resources")
			if err != nil {
				return stopPolling{err}
			}
			kiOut, _, err := p.ki.run("api-resources")
			if err != nil {
				return err
			}
			// kubeindex serves exactly the resources it caches: the API
			// server's rows for those, in the same order, with the same
			// short names, versions, scope and kind.
			want := cachedRows(tableCells(apiOut))
			got := strings.Split(tableCells(kiOut), "\n")
			if d := cmp.Diff(want, got); d != "" {
				return fmt.Errorf("api-resources differ (-API server's rows for the cached resources +kubeindex):\n%s", d)
			}
			return nil
		})
	})

	t.Run("get pods -w", func(t *testing.T) {
		watchSeesCreateRelabelDelete(t, p, cs, seeded.Namespaces[1])
	})

	t.Run("apply is refused", func(t *testing.T) {
		applyRefused(t, p.ki, cs, ns)
	})
}

// selfReviews are the resources kubeindex serves besides those it caches:
// the questions a caller asks about itself (kubectl auth can-i, whoami).
var selfReviews = []struct{ plural, group string }{
	{"selfsubjectaccessreviews", "authorization.k8s.io"}, {"selfsubjectrulesreviews", "authorization.k8s.io"},
	{"selfsubjectreviews", "authentication.k8s.io"},
}

// cachedRows keeps the header and the rows of kubeAPIResources and
// selfReviews from the cells of `kubectl api-resources` (NAME | SHORTNAMES
// | APIVERSION | ...).
func cachedRows(cells string) []string {
	lines := strings.Split(cells, "\n")
	out := []string{lines[0]}
	for _, l := range lines[1:] {
		f := strings.Split(l, " | ")
		if len(f) < 3 {
			continue
		}
		group, _, _ := strings.Cut(f[2], "/")
		if !strings.Contains(f[2], "/") {
			group = ""
		}
		for _, r := range slices.Concat(kubeAPIResources, selfReviews) {
			if r.plural == f[0] && r.group == group {
				out = append(out, l)
			}
		}
	}
	return out
}

// watchSeesCreateRelabelDelete runs `kubectl get pods -w` against both
// servers, creates, relabels and deletes a pod, and requires both to print
// the same rows: the namespace's pods, then ADDED, MODIFIED and DELETED.
func watchSeesCreateRelabelDelete(t *testing.T, p kubectlPair, cs kubernetes.Interface, ns string) {
	args := []string{"get", "pods", "-n", ns, "-w", "--output-watch-events"}
	existing, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(existing.Items) == 0 {
		t.Fatalf("no pods in %s: the watches would print nothing to show they started", ns)
	}
	// kubeindex must hold them before its watch starts, or its first rows
	// would differ for a reason this test is not about.
	eventually(t, converge, "kubeindex to hold the namespace's pods", func() error {
		_, err := p.same1(ns)
		return err
	})
	watches := map[string]*kubectlWatch{"API server": p.api.watch(t, args...), "kubeindex": p.ki.watch(t, args...)}
	printed := func(want func(rows []string) bool, what string) func() error {
		return func() error {
			for name, w := range watches {
				out, errOut, exited := w.output()
				if exited {
					return stopPolling{fmt.Errorf("kubectl %s against the %s exited:\n%s\nstderr: %s", strings.Join(args, " "), name, out, errOut)}
				}
				if !want(watchRows(out)) {
					return fmt.Errorf("the %s's watch has not printed %s:\n%s\nstderr: %s", name, what, out, errOut)
				}
			}
			return nil
		}
	}
	rowsAtLeast := func(n int) func() error {
		return printed(func(rows []string) bool { return len(rows) >= n+1 }, fmt.Sprintf("%d rows", n))
	}
	// The initial rows are printed once the list is done; the watch goes on
	// from the list's resourceVersion, so what follows is never missed.
	eventually(t, converge, "both watches to print the existing pods", rowsAtLeast(len(existing.Items)))

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: ns, Labels: map[string]string{"step": "created"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/watched:1"}}},
	}
	ctx := t.Context()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"step":"relabelled"}}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// No kubelet: only a zero grace period deletes at once, with one
	// DELETED event (otherwise a MODIFIED sets deletionTimestamp, forever).
	if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	deleted := func(rows []string) bool {
		return len(rows) > 0 && strings.HasPrefix(rows[len(rows)-1], "DELETED | watched |")
	}
	eventually(t, converge, "both watches to print the DELETED row", printed(deleted, "DELETED watched"))

	apiOut, _, _ := watches["API server"].output()
	kiOut, _, _ := watches["kubeindex"].output()
	want, got := watchRows(apiOut), watchRows(kiOut)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kubectl %s: rows differ (-API server +kubeindex):\n%s", strings.Join(args, " "), d)
	}
	// The API server prints ADDED, MODIFIED for the relabel, then (since
	// 1.3x, even with a zero grace period) MODIFIED as the deletion sets
	// deletionTimestamp, and DELETED.
	var events []string
	for _, r := range want[len(existing.Items)+1:] {
		ev, rest, _ := strings.Cut(r, " | ")
		name, rest, _ := strings.Cut(rest, " | ")
		status := strings.Split(rest, " | ")[1]
		events = append(events, ev+" "+name+" "+status)
	}
	wantEvents := []string{"ADDED watched Pending", "MODIFIED watched Pending", "MODIFIED watched Terminating", "DELETED watched Terminating"}
	if d := cmp.Diff(wantEvents, events); d != "" {
		t.Errorf("the API server's watch did not print what this test did (-want +got):\n%s\n%s", d, apiOut)
	}
}

// same1 is nil when kubeindex lists the namespace's pods as the API server
// does (as kubectl tables).
func (p kubectlPair) same1(ns string) (string, error) {
	apiOut, _, err := p.api.run("get", "pods", "-n", ns)
	if err != nil {
		return "", stopPolling{err}
	}
	kiOut, _, err := p.ki.run("get", "pods", "-n", ns)
	if err != nil {
		return "", err
	}
	if d := cmp.Diff(tableCells(apiOut), tableCells(kiOut)); d != "" {
		return "", fmt.Errorf("pods of %s differ (-API server +kubeindex):\n%s", ns, d)
	}
	return apiOut, nil
}

// applyRefused runs `kubectl apply` against kubeindex, as is and without
// client-side validation (which needs the OpenAPI document first): it must
// fail, say that kubeindex is read-only (a 405 MethodNotAllowed), and change
// nothing.
func applyRefused(t *testing.T, ki *kubectlCmd, cs kubernetes.Interface, ns string) {
	for _, flags := range [][]string{nil, {"--validate=false"}} {
		t.Run(strings.Join(append([]string{"apply"}, flags...), " "), func(t *testing.T) {
			applyRefusedWith(t, ki, cs, ns, flags...)
		})
	}
}

func applyRefusedWith(t *testing.T, ki *kubectlCmd, cs kubernetes.Interface, ns string, flags ...string) {
	// A pod: kubectl maps the kind through kubeindex's discovery, which
	// lists only what is cached.
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: applied
  namespace: %s
spec:
  containers:
  - name: c
    image: example.com/applied:1
`, ns)
	path := filepath.Join(t.TempDir(), "applied.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := ki.run(append([]string{"apply", "-f", path}, flags...)...)
	if err == nil {
		t.Fatalf("kubectl apply against kubeindex succeeded:\n%s", out)
	}
	t.Logf("kubectl apply against kubeindex: %v", strings.TrimSpace(errOut))
	for _, want := range []string{"MethodNotAllowed", "read-only"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("kubectl apply's error does not say %q:\n%s", want, errOut)
		}
	}
	_, err = cs.CoreV1().Pods(ns).Get(t.Context(), "applied", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the pod kubectl tried to apply through kubeindex: %v, want NotFound", err)
	}
}

// createStatefulSetAndCronJob adds the two kinds of `kubectl get all` that
// Seed does not make. No controller runs: they stay as created.
func createStatefulSetAndCronJob(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	labels := map[string]string{cluster.SeedLabel: "kubectl", "app": "db"}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "example.com/db:1"}}},
	}
	ctx := t.Context()
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(2)), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl,
		},
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jobTmpl := tmpl.DeepCopy()
	jobTmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
		Spec: batchv1.CronJobSpec{
			Schedule:    "0 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: *jobTmpl}},
		},
	}
	if _, err := cs.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
