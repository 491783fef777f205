package e2e

import (
	"net/url"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// k8sPrefix is where kubeindex serves the Kubernetes API: a kubeconfig's
// server is kubeindex's URL plus this prefix.
const k8sPrefix = "/k8s"

// kubeAPIResources is what kubeindex caches for the TestKube... tests: what
// `kubectl get all` reads (the "all" category: pods, services, deployments,
// replicasets, statefulsets, daemonsets, jobs, cronjobs, replicationcontrollers,
// horizontalpodautoscalers), what `kubectl describe pod` reads (the pod and its
// events), the Widget CRD and its custom resources, and nodes and namespaces.
// Each entry is a plural and its group, as `kubectl api-resources` names them.
var kubeAPIResources = []struct{ plural, group string }{
	{"pods", ""}, {"services", ""}, {"nodes", ""}, {"namespaces", ""}, {"events", ""},
	{"replicationcontrollers", ""},
	{"deployments", "apps"}, {"replicasets", "apps"}, {"statefulsets", "apps"}, {"daemonsets", "apps"},
	{"jobs", "batch"}, {"cronjobs", "batch"},
	{"horizontalpodautoscalers", "autoscaling"},
	{"customresourcedefinitions", "apiextensions.k8s.io"},
	{cluster.WidgetGVR.Resource, cluster.WidgetGVR.Group},
}

// kubeAPIConfig is kubeindex's --config for kubeAPIResources, with the
// default indexes (pods: ip, node, owner).
func kubeAPIConfig() string {
	s := "resources:\n"
	for _, r := range kubeAPIResources {
		name := r.plural
		if r.group != "" {
			name += "." + r.group
		}
		s += "- resource: " + name + "\n"
	}
	return s
}

// startKubeAPIKubeindex runs kubeindex against the cluster whose admin
// kubeconfig is kubeconfig (the test cluster's, or one pointing at another
// kubeindex), caching kubeAPIResources. The CRD must exist before: kubeindex
// resolves widgets through discovery at start-up. extra flags come last and
// win (e.g. a fixed --listen).
func startKubeAPIKubeindex(t *testing.T, kubeconfig string, extra ...string) *kubeindex {
	t.Helper()
	args := append([]string{"--kubeconfig", kubeconfig, "--config", writeFile(t, "kubeapi.yaml", kubeAPIConfig())}, extra...)
	return startKubeindex(t, args...)
}

// restConfig is a client-go configuration with kubeindex as the server: the
// URL and prefix, nothing else (kubeindex runs without authentication here).
func (k *kubeindex) restConfig() *rest.Config {
	return &rest.Config{Host: k.URL + k8sPrefix, QPS: -1}
}

// hostPort is the address kubeindex listens on, to restart it on the same
// one.
func (k *kubeindex) hostPort(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(k.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// kubeconfigFor writes a kubeconfig whose only cluster is server (plain
// HTTP, no credentials), as a user pointing kubectl or client-go at
// kubeindex writes it.
func kubeconfigFor(t testing.TB, server string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeindex"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["anonymous"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["kubeindex"] = &clientcmdapi.Context{Cluster: "kubeindex", AuthInfo: "anonymous"}
	cfg.CurrentContext = "kubeindex"
	path := filepath.Join(t.TempDir(), "kubeconfig-kubeindex")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
