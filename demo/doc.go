// Package demo is a simulated Kubernetes cluster that lives inside the
// process and is served as a small fake Kubernetes API server.
//
// kubeindex --demo points its ordinary client-go based code (discovery, its
// raw HTTP list/watch) at [Cluster.Handler], so the demo runs through exactly
// the same informer, index, REST and stream code as a real cluster. Unit
// tests use the same server as a controllable fake: [Cluster.Apply],
// [Cluster.Delete], [Cluster.DropWatches], [Cluster.SetUnavailable] and
// [Cluster.CompactHistory] provoke what a real API server does to its
// clients, and [Cluster.Objects] is the oracle to compare a cache with.
//
// The served subset of the API is read-only: discovery (legacy JSON form),
// list with label and field selectors and limit/continue pagination, watch
// with resourceVersion, bookmarks, timeoutSeconds and 410 Gone for a version
// older than the retained history, and GET of one object. Every change bumps
// one cluster-wide resourceVersion, like etcd's revision.
//
// Everything generated is labelled as simulated: objects carry the
// annotation [SimulatedAnnotation] and /version reports a "-demo" build.
package demo
