package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// The kinformers rounds save the API server's CPU profile when BENCH_DIR is
// set; the test cluster must serve it (it once ran with --profiling=false,
// and every profile failed with a 404 that only a log line told).
func TestAPIServerProfile(t *testing.T) {
	r := &runner{c: cluster.StartForTest(t)}
	path := filepath.Join(t.TempDir(), "apiserver.pprof")
	if err := <-r.profileAPIServer(t.Context(), path, time.Second); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("the profile is not a gzipped pprof profile: %q", b[:min(len(b), 64)])
	}
}
