package cache

import (
	"strconv"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// AppendHolders appends the members of an answer of now that list its
// holders, each after a comma: "pods" (an empty list when only Services or
// nodes hold the address), then "services" and "nodes" when there are
// some, as encoding/json encodes []IPPod, []IPService and []IPNode. An
// answer straight from the owner table appends the bytes the table
// encoded at the address's first lookup; one whose holders were narrowed
// (visibility, port) or built by hand is encoded here.
func (l *IPLookup) AppendHolders(b []byte) []byte {
	if l.encoded != nil {
		return append(b, l.encoded...)
	}
	return appendHolders(b, l.Pods, l.Services, l.Nodes)
}

func appendHolders(b []byte, pods []IPPod, services []IPService, nodes []IPNode) []byte {
	b = append(b, `,"pods":`...)
	if pods == nil {
		b = append(b, "[]"...)
	} else {
		b = AppendIPPods(b, pods)
	}
	if len(services) > 0 {
		b = append(b, `,"services":[`...)
		for i, sv := range services {
			b = appendHolderEntry(b, i, true, sv.Namespace, sv.Name, sv.UID, sv.Role)
		}
		b = append(b, ']')
	}
	if len(nodes) > 0 {
		b = append(b, `,"nodes":[`...)
		for i, n := range nodes {
			b = appendHolderEntry(b, i, false, "", n.Name, n.UID, n.Role)
		}
		b = append(b, ']')
	}
	return b
}

// AppendIPPods appends pods as encoding/json encodes a []IPPod.
func AppendIPPods(b []byte, pods []IPPod) []byte {
	if pods == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, p := range pods {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"namespace":`...)
		b = jsonscan.AppendString(b, p.Namespace)
		b = append(b, `,"name":`...)
		b = jsonscan.AppendString(b, p.Name)
		b = append(b, `,"uid":`...)
		b = jsonscan.AppendString(b, p.UID)
		b = append(b, `,"phase":`...)
		b = jsonscan.AppendString(b, p.Phase)
		if p.NodeName != "" {
			b = append(b, `,"nodeName":`...)
			b = jsonscan.AppendString(b, p.NodeName)
		}
		b = append(b, `,"hostNetwork":`...)
		b = strconv.AppendBool(b, p.HostNetwork)
		b = append(b, `,"active":`...)
		b = strconv.AppendBool(b, p.Active)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendHolderEntry appends the i-th entry of a list of Services or
// nodes, as encoding/json encodes IPService (namespaced) and IPNode.
func appendHolderEntry(b []byte, i int, namespaced bool, namespace, name, uid string, role indexers.Role) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, '{')
	if namespaced {
		b = append(b, `"namespace":`...)
		b = jsonscan.AppendString(b, namespace)
		b = append(b, ',')
	}
	b = append(b, `"name":`...)
	b = jsonscan.AppendString(b, name)
	b = append(b, `,"uid":`...)
	b = jsonscan.AppendString(b, uid)
	b = append(b, `,"role":`...)
	b = jsonscan.AppendString(b, string(role))
	return append(b, '}')
}
