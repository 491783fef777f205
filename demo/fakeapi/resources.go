package fakeapi

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resource describes one served resource type.
type resource struct {
	plural, singular, kind string
	group, version         string
	namespaced             bool
	shortNames             []string
	categories             []string
	subresources           []string // served for GET only
	// fields are the field-selector labels besides metadata.name and
	// metadata.namespace, each with the gjson path of its value.
	fields map[string]string
}

func (r *resource) apiVersion() string {
	if r.group == "" {
		return r.version
	}
	return r.group + "/" + r.version
}

// Resource names as Put, Delete, Each and the test controls take them.
const (
	Pods        = "pods"
	Services    = "services"
	Nodes       = "nodes"
	Namespaces  = "namespaces"
	Deployments = "deployments"
	ReplicaSets = "replicasets"
)

var resources = []*resource{
	{plural: Namespaces, singular: "namespace", kind: "Namespace", version: "v1",
		shortNames: []string{"ns"}, subresources: []string{"status"},
		fields: map[string]string{"status.phase": "status.phase"}},
	{plural: Nodes, singular: "node", kind: "Node", version: "v1",
		shortNames: []string{"no"}, subresources: []string{"status"},
		fields: map[string]string{"spec.unschedulable": "spec.unschedulable"}},
	{plural: Pods, singular: "pod", kind: "Pod", version: "v1", namespaced: true,
		shortNames: []string{"po"}, categories: []string{"all"}, subresources: []string{"status"},
		fields: map[string]string{
			"spec.nodeName":            "spec.nodeName",
			"spec.restartPolicy":       "spec.restartPolicy",
			"spec.schedulerName":       "spec.schedulerName",
			"spec.serviceAccountName":  "spec.serviceAccountName",
			"spec.hostNetwork":         "spec.hostNetwork",
			"status.phase":             "status.phase",
			"status.podIP":             "status.podIP",
			"status.nominatedNodeName": "status.nominatedNodeName",
		}},
	{plural: Services, singular: "service", kind: "Service", version: "v1", namespaced: true,
		shortNames: []string{"svc"}, categories: []string{"all"}, subresources: []string{"status"}},
	{plural: Deployments, singular: "deployment", kind: "Deployment", group: "apps", version: "v1",
		namespaced: true, shortNames: []string{"deploy"}, categories: []string{"all"},
		subresources: []string{"status"}},
	{plural: ReplicaSets, singular: "replicaset", kind: "ReplicaSet", group: "apps", version: "v1",
		namespaced: true, shortNames: []string{"rs"}, categories: []string{"all"},
		subresources: []string{"status"}},
}

// lookupResource finds a resource by plural, optionally within a group and
// version ("" matches any).
func lookupResource(group, version, plural string) *resource {
	for _, r := range resources {
		if r.plural == plural && (group == "*" || r.group == group) && (version == "" || r.version == version) {
			return r
		}
	}
	return nil
}

func resourceByName(plural string) (*resource, error) {
	if r := lookupResource("*", "", plural); r != nil {
		return r, nil
	}
	return nil, fmt.Errorf("fakeapi: unknown resource %q", plural)
}

// apiResourceList is the legacy discovery document of one group version.
func apiResourceList(group, version string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: (&resource{group: group, version: version}).apiVersion(),
	}
	for _, r := range resources {
		if r.group != group || r.version != version {
			continue
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name: r.plural, SingularName: r.singular, Namespaced: r.namespaced, Kind: r.kind,
			Verbs: []string{"get", "list", "watch"}, ShortNames: r.shortNames, Categories: r.categories,
		})
		for _, sub := range r.subresources {
			l.APIResources = append(l.APIResources, metav1.APIResource{
				Name: r.plural + "/" + sub, Namespaced: r.namespaced, Kind: r.kind, Verbs: []string{"get"},
			})
		}
	}
	return l
}
