// Package scenario generates a small, plausible Kubernetes cluster and
// keeps it changing, the way its controllers and kubelets would: namespaces,
// nodes (every other one dual-stack), deployments with their ReplicaSets
// and pods, DaemonSet pods on the host network sharing their node's IP,
// services, Job pods whose completed IPs are handed out again, and
// continuous churn.
//
// Objects are built as k8s.io/api types and written as JSON to a [Store],
// the fake API server in kubeindex --demo; the scenario reads the cluster
// back from the store before each change, so what a test writes or deletes
// there is what the next step sees. Only objects the scenario generated
// (those carrying [SimulatedAnnotation]) are changed.
//
// Everything is drawn from one seeded random source and a clock: the same
// Options give the same names, IPs, labels and uids and, step for step,
// the same churn.
package scenario
