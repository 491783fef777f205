package indexers

// Defaults returns the indexes a resource gets when its configuration names
// none. Pods are what services look up by IP, by node and by owner; anything
// else that commonly has owners (ReplicaSets, Jobs...) gets the owner index.
func Defaults(resource string) []Spec {
	switch resource {
	case "pods":
		return []Spec{
			{Name: "ip", Type: PodIP},
			{Name: "node", Type: NodeName},
			{Name: "owner", Type: Owner},
		}
	case "replicasets", "jobs", "endpointslices", "controllerrevisions":
		return []Spec{{Name: "owner", Type: Owner}}
	}
	return nil
}
