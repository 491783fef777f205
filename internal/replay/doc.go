// Package replay is the machinery every kubeindex stream is built on: a
// bounded log of events with positions, from which a client that comes back
// with the last position it saw is served exactly what it missed or told
// that it cannot be ("expired", "ahead"); and, per subscriber, a bounded
// queue with the overflow rule: a subscriber that falls behind is told to
// resync and dropped, so that nobody else ever waits for it.
//
// It is generic over the event type and knows nothing of what a position
// means: the resource streams use resource versions (several events may
// share one), the address stream a dense sequence of its own. The model is
// the API server's watch cache (k8s.io/apiserver/pkg/storage/cacher): a
// cyclic buffer of events with resource versions and, per watcher, a
// bounded channel whose overflow ends the watch.
//
// Nothing here blocks or starts a goroutine. Log and Fanout are guarded by
// their user's lock; Queue and Outbox have their own, so that a consumer
// takes from its queue without waiting for the producer's lock.
package replay
