package demo

import (
	"net/http"
	"runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// GitVersion is what /version reports; the "-demo" suffix labels the
// server as simulated wherever a client shows the server version.
const GitVersion = "v1.37.0-demo"

// serveDiscovery answers the discovery paths in their legacy JSON form and
// reports whether path was one. The answer is plain application/json
// whatever the Accept header asks: client-go's discovery client then falls
// back from aggregated discovery to the legacy documents.
func (c *Cluster) serveDiscovery(w http.ResponseWriter, r *http.Request, path string) bool {
	switch path {
	case "version":
		writeJSON(w, http.StatusOK, version.Info{
			Major: "1", Minor: "37", GitVersion: GitVersion,
			GitCommit: "0000000000000000000000000000000000000000", GitTreeState: "clean",
			BuildDate: "2026-01-01T00:00:00Z", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
			Platform: runtime.GOOS + "/" + runtime.GOARCH,
		})
	case "api":
		writeJSON(w, http.StatusOK, metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
			},
		})
	case "apis":
		writeJSON(w, http.StatusOK, metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{appsGroup()},
		})
	case "apis/apps":
		writeJSON(w, http.StatusOK, appsGroup())
	case "api/v1":
		writeJSON(w, http.StatusOK, apiResourceList("", "v1"))
	case "apis/apps/v1":
		writeJSON(w, http.StatusOK, apiResourceList("apps", "v1"))
	case "healthz", "livez", "readyz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	default:
		return false
	}
	return true
}

func appsGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: "apps/v1", Version: "v1"}
	return metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             "apps",
		Versions:         []metav1.GroupVersionForDiscovery{gv},
		PreferredVersion: gv,
	}
}
