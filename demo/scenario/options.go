package scenario

import "time"

// Options configure a scenario. The zero value is usable: every field
// documents its default.
type Options struct {
	// Seed makes generation and churn deterministic: two scenarios with
	// the same Options produce the same names, IPs, labels, uids and, step
	// for step, the same churn. Timestamps come from Now.
	Seed int64
	// Namespaces is the number of application namespaces (default 4).
	// "default" and "kube-system" exist in addition.
	Namespaces int
	// Nodes is the number of nodes (default 6, at most 200). Every other
	// node, starting with the first, is dual-stack.
	Nodes int
	// DeploymentsPerNamespace (default 3): each deployment has one
	// ReplicaSet, 2-5 pods and a Service.
	DeploymentsPerNamespace int
	// Skip names namespaces another generator owns in the same store: the
	// scenario never reads, lists or changes their objects (nil: none).
	Skip func(namespace string) bool
	// Now is the clock for timestamps (default time.Now). Set it to a
	// fixed clock for byte-identical output across runs.
	Now func() time.Time
	// PodNetwork is the second octet of the pods' IPv4 addresses,
	// 10.PodNetwork.0.0/16, one /24 per node (default 244, at most 255).
	// Simulated clusters of one fleet given the same overlap.
	PodNetwork int
}

// DefaultPodNetwork is Options.PodNetwork's default: pods in 10.244.0.0/16.
const DefaultPodNetwork = 244

func (o Options) withDefaults() Options {
	if o.Namespaces <= 0 {
		o.Namespaces = 4
	}
	if o.Nodes <= 0 {
		o.Nodes = 6
	}
	o.Nodes = min(o.Nodes, 200) // node addresses are 10.0.0.11 upwards
	if o.DeploymentsPerNamespace <= 0 {
		o.DeploymentsPerNamespace = 3
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PodNetwork <= 0 || o.PodNetwork > 255 {
		o.PodNetwork = DefaultPodNetwork
	}
	return o
}
