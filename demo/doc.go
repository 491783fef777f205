// Package demo is the simulated cluster behind kubeindex --demo: a
// [scenario] of generated objects and churn, written into a [fakeapi]
// server that lives inside the process.
//
// kubeindex --demo points its ordinary client-go based code (discovery, its
// raw HTTP list/watch) at [Cluster.Handler], so the demo runs through
// exactly the same informer, index, REST and stream code as a real
// cluster; [Cluster.Run] keeps the scenario changing.
//
// Tests build a [TestCluster] with [NewTest] instead: the same cluster,
// plus what only tests do to it (write and delete objects, read them back
// as an oracle, drop watches, compact the history, take the server down).
// The binary never reaches those.
//
// Everything generated is labelled as simulated: objects carry the
// annotation [scenario.SimulatedAnnotation] and /version reports a "-demo"
// build.
package demo
