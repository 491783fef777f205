package fakeapi

import (
	"net/http"
	"slices"
	"strings"
)

// Handler returns the HTTP API. It serves GET (and HEAD) only:
// discovery, lists, watches and single objects, all as JSON. It is safe
// for any number of concurrent requests, also while the cluster churns.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.isUnavailable() {
		writeError(w, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable",
			message: "the API server is unavailable (a simulated outage)"})
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, &apiError{code: http.StatusMethodNotAllowed, reason: "MethodNotAllowed",
			message: "the fake API server is read-only"})
		return
	}
	path := strings.Trim(r.URL.Path, "/")
	if s.serveDiscovery(w, r, path) {
		return
	}
	p, err := parsePath(path)
	if err != nil {
		writeError(w, err)
		return
	}
	if p.name != "" {
		s.serveGet(w, p)
		return
	}
	q, err := parseQuery(p.res, r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	if q.watch {
		s.serveWatch(w, r, &watcher{
			res: p.res, namespace: p.namespace, ls: q.ls, fs: q.fs, after: q.rv,
			ch: make(chan frame, s.opts.WatchBuffer), stop: make(chan struct{}),
		}, q)
		return
	}
	s.serveList(w, p, q)
}

// resourcePath is a parsed resource URL.
type resourcePath struct {
	res       *resource
	namespace string
	name      string
	sub       string
}

// parsePath parses api/v1/... and apis/{group}/{version}/...:
//
//	{resource}[/{name}[/{subresource}]]
//	namespaces/{namespace}/{resource}[/{name}[/{subresource}]]
func parsePath(path string) (resourcePath, error) {
	segs := strings.Split(path, "/")
	var group, version string
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		version, segs = segs[1], segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		group, version, segs = segs[1], segs[2], segs[3:]
	default:
		return resourcePath{}, notFound(nil, "")
	}
	var p resourcePath
	if len(segs) >= 3 && segs[0] == "namespaces" {
		if r := lookupResource(group, version, segs[2]); r != nil && r.namespaced && segs[1] != "" {
			p.namespace, segs = segs[1], segs[2:]
		}
	}
	p.res = lookupResource(group, version, segs[0])
	if p.res == nil || len(segs) > 3 {
		return resourcePath{}, notFound(nil, "")
	}
	if len(segs) > 1 {
		p.name = segs[1]
		if p.name == "" || p.res.namespaced && p.namespace == "" {
			return resourcePath{}, notFound(nil, "")
		}
	}
	if len(segs) > 2 {
		p.sub = segs[2]
		if !slices.Contains(p.res.subresources, p.sub) {
			return resourcePath{}, notFound(nil, "")
		}
	}
	return p, nil
}

// serveGet answers one object; a subresource GET answers the whole object,
// as the API server does for status.
func (s *Server) serveGet(w http.ResponseWriter, p resourcePath) {
	s.mu.Lock()
	o := s.objects[p.res.plural][key{p.namespace, p.name}]
	s.mu.Unlock()
	if o == nil {
		writeError(w, notFound(p.res, p.name))
		return
	}
	writeBytes(w, http.StatusOK, o.full)
}
