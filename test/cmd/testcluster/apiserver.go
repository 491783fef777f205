//go:build !race

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// Service IP ranges are dual-stack so tests can create dual-stack Services.
// Nothing routes them: they are only numbers stored in etcd.
const serviceClusterIPRanges = "10.96.0.0/16,fd00:10:96::/112"

// apiServerArgs are the kube-apiserver flags: a real API server with RBAC,
// service account tokens and its default admission plugins, trimmed of what
// needs machinery that does not run here.
func apiServerArgs(st state, f files, extra []string) []string {
	args := []string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", st.EtcdClientPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", st.APIServerPort),
		"--tls-cert-file=" + f.servingCert,
		"--tls-private-key-file=" + f.servKey,
		"--client-ca-file=" + f.caCert,
		"--token-auth-file=" + f.tokens,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f.saKey,
		"--service-account-signing-key-file=" + f.saKey,
		"--service-cluster-ip-range=" + serviceClusterIPRanges,
		"--allow-privileged=true",
		// /debug/pprof: the benchmark saves the API server's CPU profile
		// during its kinformers rounds (test/bench, profileAPIServer).
		"--profiling=true",
		// The lease reconciler would publish 127.0.0.1 as the endpoint of
		// the "kubernetes" Service, which Endpoints validation rejects
		// (loopback), logging an error every few seconds.
		"--endpoint-reconciler-type=none",
		// Sharded lists and watches (alpha from 1.36): the e2e tests
		// compare kubeindex's shardSelector answers with the API server's.
		"--feature-gates=ShardedListAndWatch=true",
	}
	return append(args, extra...)
}

// apiServer is a kube-apiserver running in this process.
type apiServer struct {
	done chan struct{} // closed when the server has returned
	err  error         // what it returned; read only after done
}

// startAPIServer runs kube-apiserver's own command, as its main would. The
// command installs its own SIGTERM/SIGINT handler (it may be installed once
// per process) and shuts down gracefully on the first signal.
func startAPIServer(args []string) *apiServer {
	a := &apiServer{done: make(chan struct{})}
	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(args)
	go func() {
		defer close(a.done)
		a.err = cmd.Execute()
	}()
	return a
}

// shutdownTimeout bounds a graceful API server shutdown. The API server
// stops listening at once, but waits up to a minute for open watches to end;
// a test cluster has no reason to wait for them. Past the timeout the
// process exits anyway: etcd's data is written and stays consistent.
const shutdownTimeout = 5 * time.Second

func (a *apiServer) wait() error {
	t := time.NewTimer(shutdownTimeout)
	defer t.Stop()
	select {
	case <-a.done:
		return a.err
	case <-t.C:
		fmt.Fprintf(os.Stderr, "kube-apiserver still draining watches %v after the signal; exiting anyway\n", shutdownTimeout)
		return nil
	}
}

// waitReady polls /readyz through the kubeconfig it has just written, which
// proves the kubeconfig too, until the server answers "ok". It fails as soon
// as the API server or etcd stops.
func waitReady(ctx context.Context, kubeconfig string, api *apiServer, etcdErr <-chan error) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok, _ := readyz(ctx, client, cfg.Host); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-api.done:
			return fmt.Errorf("kube-apiserver exited before it was ready: %v", api.err)
		case err := <-etcdErr:
			return fmt.Errorf("etcd failed: %w", err)
		case <-tick.C:
		}
	}
}

func readyz(ctx context.Context, client *http.Client, host string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz", nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "ok", nil
}
