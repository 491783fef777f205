package table

import "k8s.io/apimachinery/pkg/runtime/schema"

// printers are the built-in kinds' convertors, by resource. They are
// stateless, so one of each serves every request.
var printers = map[schema.GroupResource]Convertor{
	{Resource: "pods"}:                                      podPrinter(),
	{Resource: "services"}:                                  servicePrinter(),
	{Resource: "nodes"}:                                     nodePrinter(),
	{Resource: "namespaces"}:                                namespacePrinter(),
	{Resource: "configmaps"}:                                configMapPrinter(),
	{Resource: "secrets"}:                                   secretPrinter(),
	{Resource: "serviceaccounts"}:                           serviceAccountPrinter(),
	{Resource: "persistentvolumeclaims"}:                    pvcPrinter(),
	{Resource: "events"}:                                    eventPrinter(),
	{Group: "events.k8s.io", Resource: "events"}:            eventsV1Printer(),
	{Group: "apps", Resource: "deployments"}:                deploymentPrinter(),
	{Group: "apps", Resource: "replicasets"}:                replicaSetPrinter(),
	{Group: "apps", Resource: "statefulsets"}:               statefulSetPrinter(),
	{Group: "apps", Resource: "daemonsets"}:                 daemonSetPrinter(),
	{Group: "batch", Resource: "jobs"}:                      jobPrinter(),
	{Group: "batch", Resource: "cronjobs"}:                  cronJobPrinter(),
	{Group: "discovery.k8s.io", Resource: "endpointslices"}: endpointSlicePrinter(),
	{Group: "networking.k8s.io", Resource: "ingresses"}:     ingressPrinter(),
	{Group: "autoscaling", Resource: "scales"}:              scalePrinter(),
}

// ForResource is the table of a built-in resource as the API server prints
// it, and Default for a resource this package has no printer for (the
// API server does have printers for more kinds: for those the columns
// differ from its own until they are added here; see HasPrinter).
// Custom resources take ForCRD instead.
func ForResource(gr schema.GroupResource) Convertor {
	if c, ok := printers[gr]; ok {
		return c
	}
	return Default()
}

// HasPrinter reports whether ForResource has the API server's printer for
// gr rather than the default table.
func HasPrinter(gr schema.GroupResource) bool {
	_, ok := printers[gr]
	return ok
}
