//go:build !race

package main

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// contextName names the cluster, user and context in the kubeconfig.
const contextName = "testcluster"

// writeKubeconfig writes dir/kubeconfig: the API server on 127.0.0.1:port,
// verified against the test CA, as the admin user. It is rewritten on every
// start (the port may have been overridden) and returns its path.
func writeKubeconfig(dir string, port int, f files) (string, error) {
	ca, err := os.ReadFile(f.caCert)
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{
		Server:                   fmt.Sprintf("https://127.0.0.1:%d", port),
		CertificateAuthorityData: ca,
	}
	cfg.AuthInfos[contextName] = &clientcmdapi.AuthInfo{Token: f.adminToken}
	cfg.Contexts[contextName] = &clientcmdapi.Context{Cluster: contextName, AuthInfo: contextName}
	cfg.CurrentContext = contextName
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", err
	}
	return f.kubeconfigAt, writeFileAtomic(f.kubeconfigAt, b, 0o600)
}
