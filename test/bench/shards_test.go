package bench

import (
	"strings"
	"testing"
)

// TestPodWatches: the API server's open pod watches are the sum of its
// apiserver_longrunning_requests series of pod WATCHes, whatever their
// scope, and nothing else; a server without the series is an error, not 0.
func TestPodWatches(t *testing.T) {
	metrics := `# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="log",verb="CONNECT",version="v1"} 4
apiserver_longrunning_requests{component="apiserver",group="",resource="nodes",scope="cluster",subresource="",verb="WATCH",version="v1"} 5
apiserver_longrunning_requests{component="apiserver",group="apps",resource="podtemplates",scope="cluster",subresource="",verb="WATCH",version="v1"} 6
`
	if n, err := podWatches(strings.NewReader(metrics)); err != nil || n != 3 {
		t.Errorf("podWatches = %d, %v; want 3", n, err)
	}
	if _, err := podWatches(strings.NewReader("apiserver_request_total 1\n")); err == nil {
		t.Error("no series read as 0 watches")
	}
}
