package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// shared is the one cluster of a test binary that calls RunTests.
var shared struct {
	sync.Mutex
	active bool // inside RunTests
	c      *Cluster
	dir    string
	err    error // a failed start is not retried by every test
}

// RunTests runs the tests of a package whose TestMain delegates to it, and
// stops the cluster that StartForTest shared between them, if any:
//
//	func TestMain(m *testing.M) { os.Exit(cluster.RunTests(m)) }
//
// It builds cmd/testcluster before the tests run, where no test timeout
// applies. With -short, tests that ask for a cluster are skipped and nothing
// is built.
func RunTests(m *testing.M) int {
	flag.Parse()
	if !testing.Short() {
		begin := time.Now()
		if _, err := Build(context.Background()); err != nil {
			// StartForTest reports it to each test that needs a cluster.
			fmt.Fprintln(os.Stderr, "cluster: building cmd/testcluster:", err)
		} else if d := time.Since(begin); d > 30*time.Second {
			fmt.Fprintf(os.Stderr, "cluster: built cmd/testcluster in %v\n", d.Round(time.Second))
		}
	}
	shared.Lock()
	shared.active = true
	shared.Unlock()

	code := m.Run()

	shared.Lock()
	defer shared.Unlock()
	shared.active = false
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster: stopping the shared test cluster:", err)
			if code == 0 {
				code = 1
			}
		}
		shared.c = nil
	}
	if shared.dir != "" && code == 0 {
		os.RemoveAll(shared.dir)
	} else if shared.dir != "" {
		fmt.Fprintln(os.Stderr, "cluster: kept the shared test cluster's state and log in", shared.dir)
	}
	return code
}

// StartForTest returns the test binary's shared cluster, starting it on
// first use. Tests sharing it must not Stop or Restart it, and should keep to
// their own namespaces (SeedOptions.Prefix) so they can run in parallel.
//
// Without RunTests in TestMain there is no one to stop a shared cluster, so
// each test gets a private one instead (see StartPrivateForTest). With
// -short, the test is skipped.
func StartForTest(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the test cluster (kube-apiserver); skipped with -short")
	}
	shared.Lock()
	defer shared.Unlock()
	if !shared.active {
		t.Log("cluster: no cluster.RunTests in TestMain; starting a private cluster for this test")
		return StartPrivateForTest(t)
	}
	if shared.c == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "kubeindex-testcluster-")
		if shared.err == nil {
			shared.c, shared.err = startTimed(t, shared.dir)
		}
	}
	if shared.err != nil {
		t.Fatalf("starting the shared test cluster: %v", shared.err)
	}
	return shared.c
}

// StartPrivateForTest starts a cluster for this test alone, in a directory
// of its own, and stops it when the test ends. Use it for tests that Stop or
// Restart the cluster.
func StartPrivateForTest(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the test cluster (kube-apiserver); skipped with -short")
	}
	c, err := startTimed(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the test cluster: %v", err)
		}
		if t.Failed() {
			t.Logf("end of the test cluster's log %s:\n%s", c.LogPath, c.Log(60))
		}
	})
	return c
}

// startTimed builds and starts a cluster, logging how long each step took.
// Building is outside the start deadline: the very first build compiles
// kube-apiserver and can take many minutes on a small machine.
func startTimed(t testing.TB, dir string) (*Cluster, error) {
	t.Helper()
	begin := time.Now()
	if _, err := Build(context.Background()); err != nil {
		return nil, err
	}
	built := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultStartTimeout)
	defer cancel()
	c, err := Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	t.Logf("test cluster at %s: build %v, start %v (dir %s)",
		c.Host, built.Sub(begin).Round(time.Millisecond), time.Since(built).Round(time.Millisecond), dir)
	return c, nil
}

// Clients returns a typed and a dynamic client for the admin user, failing
// the test if they cannot be made.
func (c *Cluster) Clients(t testing.TB) (*kubernetes.Clientset, *dynamic.DynamicClient) {
	t.Helper()
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := c.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	return cs, dyn
}
