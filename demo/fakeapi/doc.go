// Package fakeapi is a small fake Kubernetes API server over real HTTP:
// the transport a client-go based client talks to, with the
// resourceVersion semantics of a real one.
//
// The served subset of the API is read-only over HTTP: discovery (legacy
// JSON form), list with label and field selectors and limit/continue
// pagination (a continued list is served from its first page's snapshot),
// watch with resourceVersion, bookmarks, timeoutSeconds and 410 Gone for a
// version older than the retained history, and GET of one object. The
// streaming watch-list protocol (sendInitialEvents) is refused: clients
// list, then watch. Objects are written in process with [Server.Put] and
// [Server.Delete]; every change bumps one cluster-wide resourceVersion,
// like etcd's revision, and is retained for watches that resume.
//
// [Controls] gives tests what a real API server does to its clients on its
// own (dropped watches, compaction, outages) and the objects as an oracle.
//
// It serves namespaces, nodes, pods, services, deployments and
// replicasets; what it holds is up to its writer, such as the demo's
// scenario.
package fakeapi
