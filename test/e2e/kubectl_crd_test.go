package e2e

import (
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// gizmoGVR is a custom resource whose CRD declares no printer columns:
// the API server prints Name and Age for it.
var gizmoGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}

// TestKubectlCRDColumns runs kubeindex with custom resources but without
// customresourcedefinitions in its configuration, as a user who caches
// one custom resource does, under a service account allowed only what
// deploy/ asks for: kubectl get prints what the API server prints (a
// CRD's printer columns, or Age when it has none), field selectors are
// the CRD's, and a change to the CRD shows. Without permission to read
// the CRDs, kubeindex says so at start and prints Name and Age, never the
// generic Created At.
func TestKubectlCRDColumns(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ns := seeded.Namespaces[0]
	ext := apiextensionsclient.NewForConfigOrDie(c.RESTConfig())
	createGizmos(t, ext, dyn, ns)

	config := "resources:\n- resource: widgets.example.com\n- resource: gizmos.example.com\n"
	reads := rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets", "gizmos"}, Verbs: []string{"get", "list", "watch"}}
	crds := rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
		ResourceNames: []string{"widgets.example.com", "gizmos.example.com"}, Verbs: []string{"get", "watch"}}
	api := newKubectl(t, "API server", c.Kubeconfig)

	t.Run("allowed get and watch on its CRDs", func(t *testing.T) {
		token := serviceAccountWith(t, cs, "crd-reader", reads, crds)
		k := startKubeindex(t, "--kubeconfig", tokenKubeconfig(t, c, token), "--config", writeFile(t, "crd.yaml", config))
		p := kubectlPair{api: api, ki: newKubectl(t, "kubeindex", kubeconfigFor(t, k.URL+k8sPrefix))}
		for _, args := range [][]string{
			{"get", "widgets", "-A"},
			{"get", "gizmos", "-A"},
			{"get", "gizmos", "-n", ns, "-o", "wide"},
			{"get", "widgets", "-A", "--field-selector", "spec.color=red"},
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) { p.same(t, tableCells, args...) })
		}
		if out, _, err := p.ki.run("get", "gizmos", "-A"); err != nil || !strings.Contains(out, "AGE") || strings.Contains(out, "CREATED AT") {
			t.Errorf("kubectl get gizmos through kubeindex: %v\n%s", err, out)
		}

		// The CRD changes: kubeindex follows it.
		patch := `{"spec":{"versions":[{"name":"v1","served":true,"storage":true,` +
			`"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}},` +
			`"additionalPrinterColumns":[{"name":"Shape","type":"string","jsonPath":".spec.shape"}]}]}}`
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Patch(t.Context(), "gizmos.example.com",
			types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := p.same(t, tableCells, "get", "gizmos", "-A"); !strings.Contains(got, "SHAPE") {
			t.Errorf("the API server does not print the new column:\n%s", got)
		}
		if strings.Contains(k.logTail(100), "cannot read the CRD") {
			t.Errorf("kubeindex says it cannot read a CRD it may read:\n%s", k.logTail(100))
		}
	})

	t.Run("not allowed to read its CRDs", func(t *testing.T) {
		token := serviceAccountWith(t, cs, "no-crd-reader", reads)
		k := startKubeindex(t, "--kubeconfig", tokenKubeconfig(t, c, token), "--config", writeFile(t, "crd.yaml", config))
		ki := newKubectl(t, "kubeindex", kubeconfigFor(t, k.URL+k8sPrefix))
		for _, res := range []string{"widgets", "gizmos"} {
			out, _, err := ki.run("get", res, "-n", ns)
			if err != nil {
				t.Fatal(err)
			}
			header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
			if strings.Join(header, " ") != "NAME AGE" {
				t.Errorf("kubectl get %s through kubeindex prints %v, want NAME AGE:\n%s", res, header, out)
			}
		}
		log := k.logTail(100)
		for _, crd := range []string{"widgets.example.com", "gizmos.example.com"} {
			if !strings.Contains(log, "cannot read the CRD") || !strings.Contains(log, crd) {
				t.Errorf("kubeindex does not say it cannot read %s:\n%s", crd, log)
			}
		}
	})
}

// createGizmos (re)creates the gizmos CRD without printer columns, and
// three gizmos in ns.
func createGizmos(t *testing.T, ext apiextensionsclient.Interface, dyn dynamic.Interface, ns string) {
	t.Helper()
	ctx := t.Context()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		// Left by an earlier run (-count): back to no columns.
		old, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old.Spec.Versions = crd.Spec.Versions
		if _, err := crds.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	for i, shape := range []string{"cube", "sphere", "cone"} {
		g := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": fmt.Sprintf("gizmo-%d", i), "namespace": ns},
			"spec":     map[string]any{"shape": shape},
		}}
		eventually(t, converge, "creating a gizmo", func() error {
			_, err := dyn.Resource(gizmoGVR).Namespace(ns).Create(ctx, g, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				return nil
			}
			if apierrors.IsNotFound(err) {
				return err // the CRD is not served yet
			}
			return stopPolling{err}
		})
	}
}

// serviceAccountWith creates a service account allowed exactly rules
// (cluster-wide), and returns a token of it.
func serviceAccountWith(t *testing.T, cs kubernetes.Interface, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := t.Context()
	const ns = "default"
	name = strings.ToLower(t.Name()[:min(len(t.Name()), 20)]) + "-" + name
	name = strings.NewReplacer("/", "-", "_", "-").Replace(name)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		if _, err := cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
