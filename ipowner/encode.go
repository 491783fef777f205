package ipowner

import (
	"strconv"
	"time"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// The owners' JSON, written by hand: answers about addresses are the hot
// path, and reflection was a large part of their cost. Each answer keeps
// the members it has always had, as encoding/json encoded the structs
// they were once (TestOwnerEncodings holds each to that):
//
//   - a pod of a lookup of now: namespace, name, uid, phase, nodeName
//     when set, hostNetwork, active;
//   - a Service of a lookup of now: namespace, name, uid, role; a node:
//     name, uid, role;
//   - an owner at a moment (Interval): kind, namespace when set, name,
//     uid, role, hostNetwork when true, from, to when ended, since when
//     set;
//   - an owner in the address stream: kind, namespace when set, name,
//     uid, role, hostNetwork when true, nodeName when set.

// AppendHolders appends the members of an answer of now that list its
// holders, each after a comma: "pods" (an empty list when only Services or
// nodes hold the address), then "services" and "nodes" when there are
// some. An answer straight from the owner table appends the bytes the
// table encoded at the address's first lookup; one whose holders were
// narrowed (visibility, port) is encoded here.
func (l *Answer[O]) AppendHolders(b []byte) []byte {
	if l.encoded != nil {
		return append(b, l.encoded...)
	}
	return appendHolders(b, l.Pods, l.Services, l.Nodes)
}

func appendHolders(b []byte, pods, services, nodes []Owner) []byte {
	b = append(b, `,"pods":`...)
	if pods == nil {
		b = append(b, "[]"...)
	} else {
		b = AppendPods(b, pods)
	}
	if len(services) > 0 {
		b = append(b, `,"services":[`...)
		for i := range services {
			b = appendHolderEntry(b, i, &services[i])
		}
		b = append(b, ']')
	}
	if len(nodes) > 0 {
		b = append(b, `,"nodes":[`...)
		for i := range nodes {
			b = appendHolderEntry(b, i, &nodes[i])
		}
		b = append(b, ']')
	}
	return b
}

// AppendPods appends pods as a lookup of now lists them; null for nil.
func AppendPods(b []byte, pods []Owner) []byte {
	if pods == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range pods {
		p := &pods[i]
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
		b = strconv.AppendBool(b, p.Active())
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendHolderEntry appends the i-th entry of a list of Services or
// nodes of a lookup of now.
func appendHolderEntry(b []byte, i int, o *Owner) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, '{')
	if o.Kind.Namespaced() {
		b = append(b, `"namespace":`...)
		b = jsonscan.AppendString(b, o.Namespace)
		b = append(b, ',')
	}
	b = append(b, `"name":`...)
	b = jsonscan.AppendString(b, o.Name)
	b = append(b, `,"uid":`...)
	b = jsonscan.AppendString(b, o.UID)
	b = append(b, `,"role":`...)
	b = jsonscan.AppendString(b, string(o.Role))
	return append(b, '}')
}

// appendOwnerFields appends the members every owner of the history and
// the address stream has, after an opening '{': kind, namespace when
// set, name, uid, role, hostNetwork when true.
func appendOwnerFields(b []byte, o *Owner) []byte {
	b = append(b, `"kind":`...)
	b = jsonscan.AppendString(b, o.Kind.String())
	if o.Namespace != "" {
		b = append(b, `,"namespace":`...)
		b = jsonscan.AppendString(b, o.Namespace)
	}
	b = append(b, `,"name":`...)
	b = jsonscan.AppendString(b, o.Name)
	b = append(b, `,"uid":`...)
	b = jsonscan.AppendString(b, o.UID)
	b = append(b, `,"role":`...)
	b = jsonscan.AppendString(b, string(o.Role))
	if o.HostNetwork {
		b = append(b, `,"hostNetwork":true`...)
	}
	return b
}

// AppendInterval appends an owner at a moment.
func AppendInterval(b []byte, iv *Interval) []byte {
	b = appendOwnerFields(append(b, '{'), &iv.Owner)
	b = append(b, `,"from":`...)
	b = appendTime(b, iv.From)
	if !iv.To.IsZero() {
		b = append(b, `,"to":`...)
		b = appendTime(b, iv.To)
	}
	if iv.Since != "" {
		b = append(b, `,"since":`...)
		b = jsonscan.AppendString(b, iv.Since)
	}
	return append(b, '}')
}

// AppendStreamOwner appends an owner as the address stream sends it.
func AppendStreamOwner(b []byte, o *Owner) []byte {
	b = appendOwnerFields(append(b, '{'), o)
	if o.NodeName != "" {
		b = append(b, `,"nodeName":`...)
		b = jsonscan.AppendString(b, o.NodeName)
	}
	return append(b, '}')
}

// AppendTime appends t as encoding/json encodes a time.Time, in UTC.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
