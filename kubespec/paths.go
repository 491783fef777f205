package kubespec

import "strings"

// Served is one resource the Kubernetes API under /k8s serves, as the API
// server's OpenAPI paths name it.
type Served struct {
	Group, Version, Plural, Kind string
	Namespaced                   bool
	// Subresources are the subresources read (status, scale); the others
	// are answered 405 and are not declared.
	Subresources []string
	// Create: a POST to the collection is answered (the self reviews,
	// which create nothing), not refused.
	Create bool
}

// gvPath is a group version's key in the OpenAPI v3 discovery, and the
// tail of its document's path: "api/v1", "apis/apps/v1".
func gvPath(group, version string) string {
	if group == "" {
		return "api/" + version
	}
	return "apis/" + group + "/" + version
}

func (r Served) gvPath() string { return gvPath(r.Group, r.Version) }

// apiPath is an API server path read into its parts:
//
//	/api/v1/pods                                  list, all namespaces
//	/api/v1/namespaces/{namespace}/pods/{name}    one object
//	/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale
//	/api/v1/watch/pods                            the deprecated watch paths
type apiPath struct {
	gv          string // as gvPath
	watch       bool
	inNamespace bool
	resource    string
	named       bool
	subresource string
}

// parseAPIPath reads p; ok is false for anything that is not a resource
// path (discovery, /version, /logs...).
func parseAPIPath(p string) (ap apiPath, ok bool) {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		ap.gv, segs = "api/"+segs[1], segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		ap.gv, segs = "apis/"+segs[1]+"/"+segs[2], segs[3:]
	default:
		return ap, false
	}
	if segs[0] == "watch" {
		ap.watch, segs = true, segs[1:]
	}
	if len(segs) >= 3 && segs[0] == "namespaces" && segs[1] == "{namespace}" {
		ap.inNamespace, segs = true, segs[2:]
	}
	switch len(segs) {
	case 3:
		ap.subresource = segs[2]
		fallthrough
	case 2:
		if !strings.HasPrefix(segs[1], "{") {
			return ap, false
		}
		ap.named = true
		fallthrough
	case 1:
		ap.resource = segs[0]
	default:
		return ap, false
	}
	return ap, ap.resource != ""
}

// servedPaths finds, for paths of the API server, what /k8s serves of them.
type servedPaths map[string]map[string]Served // gv → plural → resource

func newServedPaths(served []Served) servedPaths {
	m := servedPaths{}
	for _, r := range served {
		gv := r.gvPath()
		if m[gv] == nil {
			m[gv] = map[string]Served{}
		}
		m[gv][r.Plural] = r
	}
	return m
}

// lookup says whether /k8s serves anything at p, and which resource.
// Watch paths (served as ?watch=true on the list path, not under /watch/)
// and subresources kubeindex does not read are not served.
func (m servedPaths) lookup(p string) (Served, bool) {
	ap, ok := parseAPIPath(p)
	if !ok || ap.watch {
		return Served{}, false
	}
	r, ok := m[ap.gv][ap.resource]
	if !ok {
		return Served{}, false
	}
	if ap.inNamespace && !r.Namespaced {
		return Served{}, false
	}
	if ap.subresource != "" {
		found := false
		for _, s := range r.Subresources {
			found = found || s == ap.subresource
		}
		if !found {
			return Served{}, false
		}
	}
	return r, true
}
