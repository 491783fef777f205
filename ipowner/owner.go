// Package ipowner answers who holds an IP address: now (the owner table),
// at a moment (the history, kept in a bbolt file when asked), and as a
// stream of changes (the mirror). It knows no informer and no stored
// object: the cache reads what each object holds into a Holding, feeds it
// in from its one event handler per informer, and hands the objects
// through as opaque values; the server asks and encodes the answers.
package ipowner

import (
	"errors"
	"strconv"
)

// Errors of the answers. The HTTP layer maps each to a status once.
var (
	// ErrNotFound: nobody holds the address (now, or at the moment asked).
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the question is malformed (an address that is not one, a
	// moment in the future, a moment with the history off).
	ErrInvalid = errors.New("invalid query")
	// ErrBeforeHistory: the moment asked about is earlier than what the
	// history holds (410, as Kubernetes answers a resourceVersion too
	// old). It is never answered with a guess.
	ErrBeforeHistory = errors.New("before the retained IP history")
)

// Kind is a kind of object that holds addresses. The zero Kind is none.
type Kind uint8

// The kinds that hold addresses, in the order answers list their holders.
const (
	Pod Kind = iota + 1
	Service
	Node
)

// Kinds are the kinds that hold addresses, in the order answers list them.
var Kinds = [...]Kind{Pod, Service, Node}

// kindNames are each kind's Kubernetes kind and resource (core group):
// the one place they are spelled.
var kindNames = [...]struct{ kind, plural string }{
	Pod:     {"Pod", "pods"},
	Service: {"Service", "services"},
	Node:    {"Node", "nodes"},
}

// String is the Kubernetes kind ("Pod"), as answers name it; "" for none.
func (k Kind) String() string {
	if int(k) >= len(kindNames) {
		return ""
	}
	return kindNames[k].kind
}

// kindNamed returns the kind String names ("Pod").
func kindNamed(name string) (Kind, bool) {
	for _, k := range Kinds {
		if kindNames[k].kind == name {
			return k, true
		}
	}
	return 0, false
}

// Plural is the kind's resource in the core group ("pods").
func (k Kind) Plural() string {
	if int(k) >= len(kindNames) {
		return ""
	}
	return kindNames[k].plural
}

// Namespaced reports whether objects of the kind live in a namespace.
func (k Kind) Namespaced() bool { return k != Node }

// KindOf returns the kind whose core-group resource is plural ("pods");
// ok is false for any other.
func KindOf(plural string) (k Kind, ok bool) {
	for _, k := range Kinds {
		if kindNames[k].plural == plural {
			return k, true
		}
	}
	return 0, false
}

// Role says how an object holds an IP address.
type Role string

// The roles of an address. A pod's role is always RolePodIP (hostNetwork
// pods included: they use the node's address, which their podIPs repeat).
const (
	RolePodIP        Role = "podIP"
	RoleClusterIP    Role = "clusterIP"
	RoleExternalIP   Role = "externalIP"
	RoleLoadBalancer Role = "loadBalancer"
	RoleNodeInternal Role = "nodeInternal"
	RoleNodeExternal Role = "nodeExternal"
)

// Held is one address an object holds, normalised
// (indexers.NormalizeIP), and how.
type Held struct {
	IP   string
	Role Role
}

// Port is a port number with its protocol (TCP, UDP or SCTP).
type Port struct {
	Number   int32
	Protocol string
}

// ParsePort reads a port query: a number 1–65535 and a protocol, TCP when
// empty, else TCP, UDP or SCTP in any case. ok is false otherwise.
func ParsePort(number, protocol string) (Port, bool) {
	n, err := strconv.ParseInt(number, 10, 32)
	if err != nil || n <= 0 || n > 65535 {
		return Port{}, false
	}
	switch protocol {
	case "", "TCP", "tcp":
		protocol = "TCP"
	case "UDP", "udp":
		protocol = "UDP"
	case "SCTP", "sctp":
		protocol = "SCTP"
	default:
		return Port{}, false
	}
	return Port{Number: int32(n), Protocol: protocol}, true
}

// Owner is an object holding an address, and how: the one model every
// answer about an address is made from. The lookups of now list pods with
// their phase and Services and nodes with their role; the history adds
// when (Interval); the mirror streams kind, names, role and, of a pod,
// hostNetwork and its node. Each encoder writes the members its answer
// has always had (encode.go).
type Owner struct {
	Kind Kind
	// HostNetwork: a pod using its node's network.
	HostNetwork bool
	Namespace   string // "" for a node
	Name, UID   string
	Role        Role
	// NodeName and Phase are a pod's node and phase (Phase in the
	// lookups of now only: the history and the mirror hold pods while
	// they are active).
	NodeName string
	Phase    string
	// Ports are those a port query tells holders apart by: an active
	// hostNetwork pod's and a Service's; nil otherwise.
	Ports []Port
}

// Active is false for a pod that has finished (Succeeded or Failed): it
// keeps its address in its status, but the address may already belong
// to another pod.
func (o *Owner) Active() bool { return o.Phase != "Succeeded" && o.Phase != "Failed" }

// Holding is what one event says an object holds now. The cache reads it
// from the object before any lock is taken and feeds it to the table, the
// history and the mirror; a delete is a Holding of nothing.
type Holding struct {
	// Owner is the object (Role unset: each Held says it).
	Owner Owner
	// Held is each (address, role) once: a pod's podIPs while it is
	// active, a Service's or a node's addresses.
	Held []Held
	// Ports are those of an active hostNetwork pod holding addresses, or
	// of a Service holding any: the holders a port tells apart.
	Ports []Port
	// Begin is, for an object of the initial list, when it began holding
	// its addresses (unix ns: creation or start), and Since says which
	// ("creation", "start"); zero and "" otherwise.
	Begin int64
	Since string
	// PodIPs are all a pod's podIPs, completed or not: the lookups of now
	// answer completed pods too.
	PodIPs []string
}
