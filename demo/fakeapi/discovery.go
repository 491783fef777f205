package fakeapi

import (
	"fmt"
	"net/http"
	"runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
)

// serveDiscovery answers the discovery paths in their legacy JSON form and
// reports whether path was one. The answer is plain application/json
// whatever the Accept header asks: client-go's discovery client then falls
// back from aggregated discovery to the legacy documents.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, path string) bool {
	switch path {
	case "version":
		var major, minor string
		if v, err := utilversion.ParseGeneric(s.opts.GitVersion); err == nil {
			major, minor = fmt.Sprint(v.Major()), fmt.Sprint(v.Minor())
		}
		writeJSON(w, http.StatusOK, version.Info{
			Major: major, Minor: minor, GitVersion: s.opts.GitVersion,
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
