package indexers

// Defaults returns the indexes a resource gets when its configuration names
// none. It takes the resolved API group and plural resource, never a name as
// typed: "po", "Pod" and "v1/pods" all resolve to ("", "pods"), and a CRD
// called "pods" in another group is not the built-in. Pods are what services
// look up by IP, by node and by owner; the built-ins that commonly have
// owners (ReplicaSets, Jobs...) get the owner index.
func Defaults(group, resource string) []Spec {
	switch group + "/" + resource {
	case "/pods":
		return []Spec{
			{Name: "ip", Type: PodIP},
			{Name: "node", Type: NodeName},
			{Name: "owner", Type: Owner},
		}
	case "apps/replicasets", "batch/jobs", "discovery.k8s.io/endpointslices", "apps/controllerrevisions":
		return []Spec{{Name: "owner", Type: Owner}}
	}
	return nil
}
