// Package e2e holds kubeindex to a real kube-apiserver: the built binary runs
// against the test cluster (test/cluster) as a user would run it, and what it
// answers is compared with what the API server answers. The API server is the
// oracle.
//
// Every test in this package shares one cluster (cluster.StartForTest),
// except the outage test, which stops its API server and so has its own.
// Tests do not run in parallel: several compare cluster-wide counts.
//
// Run them alone with `make test-e2e` or `cd test && go test ./e2e/`.
package e2e

import (
	"os"
	"testing"

	"github.com/kubeindex/kubeindex/test/cluster"
	"github.com/kubeindex/kubeindex/test/kubeindexbin"
)

func TestMain(m *testing.M) {
	code := cluster.RunTests(m)
	kubeindexbin.Remove()
	os.Exit(code)
}
