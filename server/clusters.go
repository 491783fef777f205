package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/internal/text"
)

// DefaultClusterName is the name of the one cluster of a server that
// serves a single cluster: it answers under /clusters/default/ as at the
// root, and GET /api/v1/clusters lists it under this name.
const DefaultClusterName = "default"

// clustersPrefix starts the paths of one cluster: /clusters/{name}/ then
// any path its own server serves (/api/v1/..., /k8s/...).
const clustersPrefix = "/clusters/"

// Clusters is the fleet a server routes /clusters/{name}/ to, and lists
// on GET /api/v1/clusters. Its methods must be safe for concurrent use.
type Clusters interface {
	// Cluster returns the named cluster's server, or why there is none: an
	// error wrapping ErrUnknownCluster when no cluster has the name, or
	// ErrClusterUnavailable (with the reason) while it is not serving.
	Cluster(name string) (*Server, error)
	// Names lists the clusters in the configured order: what a question
	// across clusters asks, without States' counts (a listing of each
	// cluster's store).
	Names() []string
	// States describes every cluster, in the configured order.
	States() []ClusterState
	// Ready is the fleet's readiness, for /readyz.
	Ready() bool
}

// The errors of Clusters.Cluster; the error translation answers them 404
// and 503.
var (
	ErrUnknownCluster     = errors.New("no such cluster")
	ErrClusterUnavailable = errors.New("cluster not serving")
)

// ClusterState is one cluster's line in GET /api/v1/clusters.
type ClusterState struct {
	Name string `json:"name"`
	// State is synced (every resource listed, watches open), syncing (its
	// first lists under way), stale (a watch down longer than
	// --stale-after: answers may be old) or failed (never reached, or its
	// configuration does not match what it serves: nothing is answered).
	State string `json:"state"`
	// Reason says why a cluster is not synced: the last error.
	Reason string `json:"reason,omitempty"`
	// Resources is how many resources it caches, Objects how many objects.
	Resources int   `json:"resources"`
	Objects   int64 `json:"objects"`
	Simulated bool  `json:"simulated,omitempty"`
}

// The states of ClusterState.State.
const (
	ClusterSynced  = "synced"
	ClusterSyncing = "syncing"
	ClusterStale   = "stale"
	ClusterFailed  = "failed"
)

// Shared is what the servers of one process share when each cluster of a
// fleet has its own: the bounds on connections and on each client's
// streams, and the stream hub, whose subscriptions are bounded together
// and which ends every stream when the serving server shuts down. Build
// it with NewShared and give it to every server's Options.
type Shared struct {
	limits  *limiter
	streams *streamHub
}

// NewShared builds what servers share from the process's limits and
// stream options (zero values take the documented defaults).
func NewShared(limits LimitOptions, streams StreamOptions) *Shared {
	return &Shared{limits: newLimiter(limits.withDefaults()), streams: newStreamHub(streams)}
}

// clusterMissKey marks a request for /clusters/{name}/ that no cluster
// server took: the front answers it, after authentication, with why.
type clusterMissKey struct{}

// root is the server's handler: a path under /clusters/{name}/ goes to that
// cluster's server with the prefix removed, so that each cluster's whole
// API (and its Kubernetes API, a kubeconfig's server
// http://host:port/clusters/{name}/k8s) is its own server's, unchanged;
// everything else to this server's routes. Each cluster's server
// authenticates and authorizes the request itself, against its own
// cluster; a cluster that is unknown or not serving is answered by this
// server, after authentication, so that an unauthenticated caller learns
// nothing about which clusters exist.
func (s *Server) root() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, rest, ok := clusterPath(r.URL.Path)
		if !ok {
			s.echo.ServeHTTP(w, r)
			return
		}
		target, err := s.cluster(name)
		if err != nil {
			ctx := context.WithValue(r.Context(), clusterMissKey{}, err)
			s.echo.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		r2.URL = new(url.URL)
		*r2.URL = *r.URL
		r2.URL.Path = rest
		// The name is a DNS label: it has no escapes, so the raw path
		// loses the same prefix.
		r2.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, clustersPrefix+name)
		if r.URL.RawPath != "" && r2.URL.RawPath == "" {
			r2.URL.RawPath = "/"
		}
		target.echo.ServeHTTP(w, r2)
	})
}

// clusterPath splits /clusters/{name}/rest into name and /rest (/ when
// there is no rest).
func clusterPath(path string) (name, rest string, ok bool) {
	after, ok := strings.CutPrefix(path, clustersPrefix)
	if !ok {
		return "", "", false
	}
	name, rest, _ = strings.Cut(after, "/")
	if name == "" {
		return "", "", false
	}
	return name, "/" + rest, true
}

// cluster is the server serving the named cluster: the fleet's, or this
// server itself under its own name when it serves one cluster.
func (s *Server) cluster(name string) (*Server, error) {
	if s.opts.Clusters != nil {
		return s.opts.Clusters.Cluster(name)
	}
	if name == s.opts.ClusterName {
		return s, nil
	}
	return nil, fmt.Errorf("%w %q: this server serves one cluster, %q", ErrUnknownCluster, text.Truncate(name, 64), s.opts.ClusterName)
}

// clusterMiss is why a request under /clusters/{name}/ found no server,
// nil when it was not such a request.
func clusterMiss(c echo.Context) error {
	err, _ := c.Request().Context().Value(clusterMissKey{}).(error)
	return err
}

// fleetFront tells whether this server is the front of a fleet: it serves
// the fleet's routes only, each cluster's API being under its prefix.
func (s *Server) fleetFront() bool { return s.opts.Clusters != nil }

// errFleetRoot answers a cluster's route asked of a fleet's front.
var errFleetRoot = echo.NewHTTPError(http.StatusNotFound,
	"this kubeindex serves several clusters: ask one under /clusters/{name}/ (GET /api/v1/clusters lists them)")

// clusterStates answers GET /api/v1/clusters.
func (s *Server) clusterStates(c echo.Context) error {
	if _, err := queryParams(c); err != nil {
		return err
	}
	var states []ClusterState
	if s.opts.Clusters != nil {
		states = s.opts.Clusters.States()
	} else {
		states = []ClusterState{StateOf(s.opts.ClusterName, s.r)}
	}
	var config *ConfigStatus
	if cr, ok := s.opts.Clusters.(ConfigReporter); ok {
		st := cr.ConfigStatus()
		config = &st
	}
	return c.JSON(http.StatusOK, struct {
		Kind          string         `json:"kind"`
		Clusters      []ClusterState `json:"clusters"`
		Configuration *ConfigStatus  `json:"configuration,omitempty"`
	}{"ClusterList", states, config})
}

// StateOf describes a cluster served from r, with the reason its
// resources give: failed when one has not synced and has an error (its
// lists fail), else syncing while one has not synced, else stale when one
// is, else synced.
func StateOf(name string, r Reader) ClusterState {
	st := ClusterState{Name: name, State: ClusterSynced}
	rank := 0 // of the state: synced, stale, syncing, failed
	for _, rs := range r.Resources() {
		st.Resources++
		st.Objects += rs.Count
		st.Simulated = st.Simulated || rs.Simulated
		state, rk := ClusterSynced, 0
		switch {
		case !rs.Synced && rs.LastError != "":
			state, rk = ClusterFailed, 3
		case !rs.Synced:
			state, rk = ClusterSyncing, 2
		case rs.Stale:
			state, rk = ClusterStale, 1
		}
		if rk > rank {
			st.State, rank = state, rk
			switch {
			case rs.LastError != "":
				st.Reason = rs.Name + ": " + rs.LastError
			case !rs.WatchConnected:
				st.Reason = rs.Name + ": watch closed, not reopened since " + rs.DisconnectedSince.UTC().Format(time.RFC3339)
			}
		}
	}
	return st
}
