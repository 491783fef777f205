package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestKubectlOpenAPI points kubectl at kubeindex's /k8s for what needs the
// API server's OpenAPI documents: explain prints the API server's text
// (from OpenAPI v3, and from v2 with --output plaintext-openapiv2), and
// apply, create, edit and delete get as far as the write, which ends in
// the read-only 405 (never "failed to download openapi"), and change
// nothing.
func TestKubectlOpenAPI(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ns := seeded.Namespaces[0]
	k := startKubeAPIKubeindex(t, c.Kubeconfig)
	p := kubectlPair{
		api: newKubectl(t, "API server", c.Kubeconfig),
		ki:  newKubectl(t, "kubeindex", kubeconfigFor(t, k.URL+k8sPrefix)),
	}

	t.Run("kubectl 1.28", func(t *testing.T) {
		bin, err := cluster.BuildKubectl128(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		old := kubectlPair{
			api: &kubectlCmd{name: "API server", bin: bin, kubeconfig: c.Kubeconfig, home: t.TempDir()},
			ki:  &kubectlCmd{name: "kubeindex", bin: bin, kubeconfig: kubeconfigFor(t, k.URL+k8sPrefix), home: t.TempDir()},
		}
		if out, _, err := old.ki.run("version", "--client"); err != nil || !strings.Contains(out, "v1.28.") {
			t.Fatalf("not kubectl 1.28: %v\n%s", err, out)
		}
		for _, args := range [][]string{
			{"explain", "pods.spec.containers"},
			{"explain", "widgets.spec"},
			{"explain", "pods.spec.containers", "--output", "plaintext-openapiv2"},
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) { old.same(t, asIs, args...) })
		}
		writesEndIn405(t, old.ki, cs, ns, seeded.Pods[1])
	})

	for _, args := range [][]string{
		{"explain", "pods"},
		{"explain", "pods.spec.containers.resources"},
		{"explain", "deployments.spec.strategy", "--api-version", "apps/v1"},
		{"explain", "nodes", "--recursive"},
		{"explain", "widgets.spec"},
		{"explain", "cronjobs.spec", "--output", "plaintext-openapiv2"},
		{"explain", "pods.status.conditions", "--output", "plaintext-openapiv2"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			p.same(t, asIs, args...)
		})
	}

	t.Run("v3 schemas are the API server's", func(t *testing.T) {
		apiCfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		api := openapi3.NewRoot(discovery.NewDiscoveryClientForConfigOrDie(apiCfg).OpenAPIV3())
		ki := openapi3.NewRoot(discovery.NewDiscoveryClientForConfigOrDie(k.restConfig()).OpenAPIV3())
		for _, gv := range []schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "example.com", Version: "v1"}} {
			want, err := api.GVSpec(gv)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ki.GVSpec(gv)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Components.Schemas) == 0 {
				t.Fatalf("%v: kubeindex serves no schemas", gv)
			}
			for name, s := range got.Components.Schemas {
				if d := cmp.Diff(jsonOf(t, want.Components.Schemas[name]), jsonOf(t, s)); d != "" {
					t.Errorf("%v: schema %s differs (-API server +kubeindex):\n%s", gv, name, d)
				}
			}
			for path := range got.Paths.Paths {
				if want.Paths.Paths[path] == nil {
					t.Errorf("%v: kubeindex declares %s, which the API server does not", gv, path)
				}
			}
		}
	})

	t.Run("writes end in the read-only 405", func(t *testing.T) {
		writesEndIn405(t, p.ki, cs, ns, seeded.Pods[0])
	})
}

// writesEndIn405 runs kubectl's writes against kubeindex: apply (new
// object, existing object, server-side), create, edit, delete and label
// each end in the read-only 405, and nothing changes.
func writesEndIn405(t *testing.T, ki *kubectlCmd, cs kubernetes.Interface, ns string, pod *corev1.Pod) {
	dir := t.TempDir()
	newPod := writeManifest(t, dir, "new.yaml", podManifest(ns, "applied", nil))
	existing := writeManifest(t, dir, "existing.yaml", podManifest(pod.Namespace, pod.Name, pod.Labels))
	editor := filepath.Join(dir, "editor.sh")
	script := "#!/bin/sh\nsed -i -e 's#image: #image: edited.#' \"$1\"\n"
	if err := os.WriteFile(editor, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"apply a new object", nil, []string{"apply", "-f", newPod}},
		{"apply an object that exists", nil, []string{"apply", "-f", existing}},
		{"apply --server-side", nil, []string{"apply", "--server-side", "-f", existing}},
		{"create", nil, []string{"create", "-f", newPod}},
		{"edit", []string{"KUBE_EDITOR=" + editor}, []string{"edit", "pod", "-n", pod.Namespace, pod.Name}},
		{"delete", nil, []string{"delete", "pod", "-n", pod.Namespace, pod.Name}},
		{"label", nil, []string{"label", "pod", "-n", pod.Namespace, pod.Name, "edited=yes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readOnly405(t, ki, tc.env, tc.args...)
		})
	}
	unchanged(t, cs, pod.Namespace, pod.Name, pod.ResourceVersion)
	if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), "applied", metav1.GetOptions{}); err == nil {
		t.Error("a pod was created through kubeindex")
	}
}

// readOnly405 runs a kubectl write against kubeindex: it must fail with
// the read-only 405, and not for want of an OpenAPI document.
func readOnly405(t *testing.T, ki *kubectlCmd, env []string, args ...string) {
	t.Helper()
	out, errOut, err := ki.runEnv(env, args...)
	if err == nil {
		t.Fatalf("kubectl %s against kubeindex succeeded:\n%s", strings.Join(args, " "), out)
	}
	// The 405's message; kubectl edit prints it without the reason.
	if want := "is not allowed: kubeindex is a read-only cache"; !strings.Contains(errOut, want) {
		t.Errorf("kubectl %s: the error does not say %q:\n%s", strings.Join(args, " "), want, errOut)
	}
	for _, bad := range []string{"failed to download openapi", "could not find the requested resource"} {
		if strings.Contains(errOut, bad) {
			t.Errorf("kubectl %s: the error is %q:\n%s", strings.Join(args, " "), bad, errOut)
		}
	}
}

// unchanged fails unless the pod is still at resourceVersion rv.
func unchanged(t *testing.T, cs kubernetes.Interface, ns, name, rv string) {
	t.Helper()
	got, err := cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil || got.ResourceVersion != rv {
		t.Errorf("pod %s/%s: %v, resourceVersion %v; want %s, unchanged", ns, name, err, got.GetResourceVersion(), rv)
	}
}

func podManifest(ns, name string, labels map[string]string) string {
	l := map[string]string{"edited": "yes"}
	for k, v := range labels {
		l[k] = v
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": l},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "example.com/applied:1"}}},
	})
	return string(b)
}

func writeManifest(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(fmt.Errorf("encoding a schema: %w", err))
	}
	return string(b)
}
