package cache

import (
	"sync"
	"time"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/ipowner"
)

// ipFeed is what a shard's one event handler tells ipowner: it reads what
// each object holds into an ipowner.Holding (before any lock is taken)
// and hands it to the history, the address stream's mirror and the owner
// table. A nil feed does nothing: resources that hold no addresses.
type ipFeed struct {
	kind    ipowner.Kind
	history *ipowner.History // nil: no history
	mirror  *ipowner.Mirror
	// owners is the lookups' owner table, nil unless this resource is the
	// one they answer with (Cache.attachOwnerTable).
	owners *ipowner.Table[*Object]
}

func (c *Cache) ipFeed(r Resource) *ipFeed {
	kind, ok := ownerKind(r)
	if !ok {
		return nil
	}
	return &ipFeed{kind: kind, history: c.history, mirror: c.mirror}
}

func (f *ipFeed) observe(h ipowner.Holding) {
	if f.history != nil {
		f.history.Observe(h)
	}
	f.mirror.Observe(h)
}

// reserve makes room for n objects in whatever is fed and holds nothing
// yet: the initial list's feed knows how many it brings (feedAhead).
func (f *ipFeed) reserve(n int) {
	if f == nil {
		return
	}
	if f.history != nil {
		f.history.Reserve(n)
	}
	f.mirror.Reserve(n)
	if f.owners != nil {
		f.owners.Reserve(n)
	}
}

// add tells everything fed that obj was added. po is what was made of
// it ahead (listPrep.take): its holding, when made.
func (f *ipFeed) add(obj any, initial bool, po preparedObject) {
	o, ok := obj.(*Object)
	if !ok || f == nil {
		return
	}
	if !po.held {
		f.hold(o, holdingOf(f.kind, o, o, initial))
		return
	}
	h := po.holding
	if !initial { // made as for the initial list: only that begins before it was seen
		h.Begin, h.Since = 0, ""
	}
	f.hold(o, h)
}

// hold tells everything fed that o holds what h says.
func (f *ipFeed) hold(o *Object, h ipowner.Holding) {
	f.observe(h)
	if f.owners != nil {
		f.owners.Set(h, o)
	}
}

// update treats an object that came back under the same name with a new
// UID (deleted and recreated between two watch events, seen by a relist)
// as the delete of the old one and the add of the new.
func (f *ipFeed) update(old, cur any) {
	if f == nil {
		return
	}
	o, ok := cur.(*Object)
	if !ok {
		return
	}
	if prev, ok := old.(*Object); ok && prev.uid != o.uid {
		f.remove(prev)
	}
	f.hold(o, holdingOf(f.kind, o, o, false))
}

func (f *ipFeed) remove(obj any) {
	if f == nil {
		return
	}
	if o := handlerObject(obj); o != nil {
		h := ipowner.Holding{Owner: ipowner.Owner{Kind: f.kind, Namespace: o.namespace, Name: o.name, UID: o.uid}}
		f.observe(h)
		if f.owners != nil {
			f.owners.Remove(h.Owner)
		}
	}
}

// sections reads an object's sections: the *Object, or the *inList
// being read from a list.
type sections interface{ doc(key string) jsonscan.Doc }

// holdingOf reads what o of kind holds, through d (o itself, or o as
// its list holds it): a pod its podIPs while it has not completed (and
// all of them, for the lookups of now), a Service and a Node their
// addresses, with the ports that tell holders apart.
func holdingOf(kind ipowner.Kind, o *Object, d sections, initial bool) ipowner.Holding {
	h := ipowner.Holding{Owner: ipowner.Owner{Kind: kind, Namespace: o.namespace, Name: o.name, UID: o.uid}}
	switch kind {
	case ipowner.Pod:
		summarisePod(d, &h.Owner)
		h.PodIPs = indexers.PodIPsOf(d.doc("status"))
		if h.Owner.Active() {
			for _, ip := range h.PodIPs {
				h.Held = append(h.Held, ipowner.Held{IP: ip, Role: ipowner.RolePodIP})
			}
		}
		if h.Owner.HostNetwork && len(h.Held) > 0 {
			h.Ports = ipowner.PodPorts(d.doc("spec"))
		}
	case ipowner.Service:
		h.Held = ipowner.ServiceAddresses(d.doc("spec"), d.doc("status"))
		if len(h.Held) > 0 {
			h.Ports = ipowner.ServicePorts(d.doc("spec"))
		}
	case ipowner.Node:
		h.Held = ipowner.NodeAddresses(d.doc("status"))
	}
	if initial && len(h.Held) > 0 {
		h.Begin, h.Since = startedAt(kind, d)
	}
	return h
}

// summarisePod reads the three fields an answer gives of a pod besides
// its keys. Build noted where they are, so no part of the pod is scanned.
// The phase and the node are kept by the owner table and the mirror for
// every pod, and a hundred pods share a node: they are interned.
func summarisePod(d sections, p *ipowner.Owner) {
	spec, status := d.doc("spec"), d.doc("status")
	p.Phase, p.NodeName = phaseString(status.Member("phase")), nodeNames.intern(spec.Member("nodeName"))
	p.HostNetwork = string(spec.Member("hostNetwork")) == "true"
}

// phases are the pod phases Kubernetes defines, as JSON.
var phases = [...]string{"Pending", "Running", "Succeeded", "Failed", "Unknown"}

// phaseString is jsonString without an allocation for a defined phase.
func phaseString(v []byte) string {
	for _, p := range phases {
		if len(v) == len(p)+2 && v[0] == '"' && v[len(v)-1] == '"' && string(v[1:len(v)-1]) == p {
			return p
		}
	}
	return jsonString(v)
}

// nodeNames interns the pods' node names.
var nodeNames = interner{max: 1 << 14}

// interner hands out one copy of each JSON string value it is given, as
// a string, while it holds fewer than max: then it starts again, so names
// that are gone (nodes replaced) do not stay forever. Safe for
// concurrent use.
type interner struct {
	max int

	mu   sync.Mutex
	seen map[string]string
}

func (in *interner) intern(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if s, ok := in.seen[string(v)]; ok { // the conversion does not allocate
		return s
	}
	s := jsonString(v)
	if len(in.seen) >= in.max || in.seen == nil {
		in.seen = map[string]string{}
	}
	in.seen[string(v)] = s
	return s
}

// startedAt is when an object present at start-up (read through d) began
// holding its addresses: a pod's status.startTime, else
// metadata.creationTimestamp; 0 when neither is readable.
func startedAt(kind ipowner.Kind, d sections) (int64, string) {
	read := func(v []byte) int64 {
		s := jsonString(v)
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return 0
		}
		return t.UnixNano()
	}
	if kind == ipowner.Pod {
		status := d.doc("status")
		if t := read(status.Member("startTime")); t != 0 {
			return t, "start"
		}
	}
	metadata := d.doc("metadata")
	if t := read(metadata.Member("creationTimestamp")); t != 0 {
		return t, "creation"
	}
	return 0, ""
}

// jsonString decodes a JSON string value; anything else is "".
func jsonString(v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	s, _ := jsonscan.String(v)
	return s
}
