package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// renderDeploy builds the kustomize base in deploy/, as `kubectl apply -k`
// would, and returns its objects in kustomize's order.
func renderDeploy(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "deploy"))
	if err != nil {
		t.Fatalf("kustomize build deploy/: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		// Through JSON: kyaml's own maps hold Go ints, which
		// unstructured objects do not.
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(b); err != nil {
			t.Fatalf("%s: %v", r.CurId(), err)
		}
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		t.Fatal("deploy/ renders no objects")
	}
	return objs
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func describe(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	return o.GetKind() + " " + o.GetName()
}

// TestDeploy holds deploy/ to the real API server: every object it renders
// passes a server-side dry run; its RBAC is sufficient (kubeindex with only
// the ServiceAccount's token syncs every resource it is configured for) and
// minimal (read verbs only, on the configured resources only, never
// secrets), both as written and as the API server's authorizer decides.
func TestDeploy(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	ctx := t.Context()
	objs := renderDeploy(t)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))

	namespaces := ofKind(objs, "Namespace")
	if len(namespaces) != 1 {
		t.Fatalf("deploy/ renders %d Namespaces, want 1", len(namespaces))
	}
	ns := namespaces[0].GetName()
	sas := ofKind(objs, "ServiceAccount")
	if len(sas) != 1 || sas[0].GetNamespace() != ns {
		t.Fatalf("deploy/ renders ServiceAccounts %v, want one in %s", sas, ns)
	}
	sa := sas[0].GetName()
	roles := ofKind(objs, "ClusterRole")
	if len(roles) == 0 {
		t.Fatal("deploy/ renders no ClusterRole")
	}
	config := deployedConfig(t, objs)

	t.Run("DryRun", func(t *testing.T) {
		// The namespace first, as it is: namespaced objects are only
		// admitted into a namespace that exists. (It exists already when
		// the test runs again on the same cluster, with -count.)
		if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			dryRun(t, ctx, dyn, mapper, namespaces[0])
			if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
				t.Fatalf("namespace %s exists after a dry run", ns)
			}
		}
		createForReal(t, ctx, dyn, mapper, namespaces[0])
		for _, o := range objs {
			if o.GetKind() != "Namespace" {
				dryRun(t, ctx, dyn, mapper, o)
			}
		}
	})

	t.Run("RoleIsReadOnly", func(t *testing.T) {
		checkRolesAsWritten(t, objs, mapper, config, ns, sa)
	})

	// Sufficient: the real RBAC objects, a real token, the real binary.
	token := func() string {
		for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			for _, o := range ofKind(objs, kind) {
				createForReal(t, ctx, dyn, mapper, o)
			}
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest for %s/%s: %v", ns, sa, err)
		}
		return tr.Status.Token
	}()
	saKubeconfig := tokenKubeconfig(t, c, token)

	t.Run("ServiceAccountSyncsEverything", func(t *testing.T) {
		cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{Namespaces: 1, Nodes: 1, Replicas: 1, Widgets: 1})
		api := newAPIServer(t, c)
		for _, args := range [][]string{
			{"--kubeconfig", saKubeconfig},
			{"--kubeconfig", saKubeconfig, "--config", writeFile(t, "config.yaml", config.raw)},
		} {
			k := startKubeindex(t, args...) // every informer synced
			eventually(t, converge, "counts as the service account to match the admin's", func() error {
				return sameCounts(ctx, k, api, defaultResources)
			})
			k.stop(t)
		}
	})

	t.Run("ServiceAccountIsRefusedSecrets", func(t *testing.T) {
		// Proves the kubeconfig above is really the service account's:
		// the same binary is refused what the role does not grant.
		k := launchKubeindex(t, "--kubeconfig", saKubeconfig, "--resources", "secrets")
		eventually(t, converge, "the secrets informer to be refused", func() error {
			r, err := k.try("/readyz")
			if err != nil {
				return err
			}
			if r.code == 200 || !strings.Contains(strings.ToLower(string(r.body)), "forbidden") {
				return fmt.Errorf("/readyz: %d %s, want 503 saying forbidden", r.code, r.body)
			}
			return nil
		})
	})

	t.Run("AuthorizerAgrees", func(t *testing.T) {
		checkAuthorizer(t, ctx, cs, mapper, roles, config, ns, sa)
		checkSelfRules(t, ctx, saKubeconfig, ns)
	})
}

// dryRun creates o with dryRun=All and fails the test if the API server
// refuses it.
func dryRun(t *testing.T, ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) {
	t.Helper()
	ri := resourceFor(t, dyn, mapper, o)
	if _, err := ri.Create(ctx, o.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("server-side dry run of %s: %v", describe(o), err)
	}
}

// createForReal creates o (an existing one is left as is) and deletes it
// when the test ends, except namespaces, which never finish terminating in
// a cluster without a controller-manager.
func createForReal(t *testing.T, ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) {
	t.Helper()
	ri := resourceFor(t, dyn, mapper, o)
	_, err := ri.Create(ctx, o.DeepCopy(), metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return
	case err != nil:
		t.Fatalf("creating %s: %v", describe(o), err)
	}
	if o.GetKind() != "Namespace" {
		t.Cleanup(func() {
			if err := ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s: %v", describe(o), err)
			}
		})
	}
}

// resourceFor resolves o's kind to a resource through discovery.
func resourceFor(t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s: the API server does not serve %v: %v", describe(o), gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			t.Fatalf("%s is namespaced but renders without a namespace", describe(o))
		}
		return dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	return dyn.Resource(m.Resource)
}

// kubeindexConfig is the configuration deploy/ hands kubeindex.
type kubeindexConfig struct {
	raw       string
	resources []schema.GroupResource // resolved through discovery
}

// deployedConfig reads config.yaml from the rendered ConfigMap.
func deployedConfig(t *testing.T, objs []*unstructured.Unstructured) kubeindexConfig {
	t.Helper()
	for _, cm := range ofKind(objs, "ConfigMap") {
		raw, ok, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
		if !ok {
			continue
		}
		var file struct {
			Resources []struct {
				Resource string `json:"resource"`
			} `json:"resources"`
		}
		if err := yaml.Unmarshal([]byte(raw), &file); err != nil {
			t.Fatalf("%s config.yaml: %v", describe(cm), err)
		}
		cfg := kubeindexConfig{raw: raw}
		for _, r := range file.Resources {
			cfg.resources = append(cfg.resources, schema.ParseGroupResource(r.Resource))
		}
		return cfg
	}
	t.Fatal("deploy/ renders no ConfigMap with config.yaml")
	return kubeindexConfig{}
}

// resolve turns kubectl-style names (pods, deployments.apps) into their
// group and plural through discovery.
func resolve(t *testing.T, mapper meta.RESTMapper, grs []schema.GroupResource) []schema.GroupResource {
	t.Helper()
	var out []schema.GroupResource
	for _, gr := range grs {
		gvr, err := mapper.ResourceFor(gr.WithVersion(""))
		if err != nil {
			t.Fatalf("resource %v: %v", gr, err)
		}
		out = append(out, gvr.GroupResource())
	}
	return out
}

// tokenKubeconfig writes a kubeconfig holding only the cluster's address,
// its CA and token: no admin credentials.
func tokenKubeconfig(t *testing.T, c *cluster.Cluster, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["kubeindex"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "kubeindex"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
