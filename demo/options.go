package demo

import "time"

// Options configure a simulated cluster: the scenario generated (Seed,
// Namespaces, Nodes, DeploymentsPerNamespace, Now), how fast it churns,
// and the fake API server (HistorySize, BookmarkInterval, WatchBuffer).
// The zero value is usable: every field documents its default.
type Options struct {
	// Seed makes generation and churn deterministic: two clusters built
	// with the same Options produce the same names, IPs, labels, uids and,
	// step for step, the same churn. Timestamps come from Now.
	Seed int64
	// Namespaces is the number of application namespaces (default 4).
	// "default" and "kube-system" exist in addition.
	Namespaces int
	// Nodes is the number of nodes (default 6). Every other node, starting
	// with the first, is dual-stack.
	Nodes int
	// DeploymentsPerNamespace (default 3): each deployment has one
	// ReplicaSet, 2-5 pods and a Service.
	DeploymentsPerNamespace int
	// Pods, when more than the scenario makes (about 50), grows the
	// cluster to this many pods (default DefaultPods: the scenario's
	// own): a crowd of bare pods in namespaces of their own (see
	// [crowd]), and, unless Nodes is set, one node per 500 pods (6 to
	// 200). At most MaxPods.
	Pods int
	// ChurnInterval is the pause between churn steps in Run (default
	// 500ms). Nothing churns unless Run is called: tests that want a
	// still cluster, or to drive churn themselves with Step, do not call it.
	ChurnInterval time.Duration
	// HistorySize is how many events are retained for watches that resume
	// from a resourceVersion (default 1000). Older versions get 410 Gone.
	HistorySize int
	// BookmarkInterval is how often a watch that allows bookmarks gets one
	// (default 5s).
	BookmarkInterval time.Duration
	// WatchBuffer is how many events a watch may lag behind before it is
	// closed (default 256); the client then re-watches or relists.
	WatchBuffer int
	// Now is the clock for timestamps (default time.Now). Set it to a
	// fixed clock for byte-identical output across runs.
	Now func() time.Time
	// PodNetwork is the second octet of the scenario's pod addresses,
	// 10.PodNetwork.0.0/16 (default 244): simulated clusters given the
	// same one have overlapping pod CIDRs.
	PodNetwork int
}

// DefaultPods is Options.Pods' default: no crowd, the scenario's own pods.
const DefaultPods = 0

// MaxPods is the most pods Options.Pods may ask for.
const MaxPods = 1_000_000

// podsPerNode is how many pods the nodes of a grown cluster hold.
const podsPerNode = 500

func (o Options) withDefaults() Options {
	if o.Nodes <= 0 && o.Pods > 0 {
		o.Nodes = min(max(6, o.Pods/podsPerNode), 200)
	}
	if o.ChurnInterval <= 0 {
		o.ChurnInterval = 500 * time.Millisecond
	}
	return o
}
