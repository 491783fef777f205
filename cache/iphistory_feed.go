package cache

import (
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// ipFeed is what a shard's one event handler tells the address history
// and the address stream's mirror. A nil feed does nothing: resources that
// hold no addresses.
type ipFeed struct {
	kind    string
	history *ipHistory // nil: no history
	mirror  *addrMirror
	// owners is the lookups' owner table, nil unless this resource is the
	// one they answer with (Cache.attachOwnerTable).
	owners *ownerTable
}

func (c *Cache) ipFeed(r Resource) *ipFeed {
	kind := ownerKind(r)
	if kind == "" {
		return nil
	}
	return &ipFeed{kind: kind, history: c.history, mirror: c.mirror}
}

func (f *ipFeed) observe(h holding) {
	if f.history != nil {
		f.history.observe(h)
	}
	f.mirror.observe(h)
}

func (f *ipFeed) add(obj any, initial bool) {
	if o, ok := obj.(*Object); ok && f != nil {
		f.hold(o, holdingOf(f.kind, o, initial))
	}
}

// hold tells everything fed that o holds what h says.
func (f *ipFeed) hold(o *Object, h holding) {
	f.observe(h)
	if f.owners != nil {
		f.owners.set(idOf(f.kind, o), recordOf(f.kind, o, h))
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
	f.hold(o, holdingOf(f.kind, o, false))
}

func (f *ipFeed) remove(obj any) {
	if f == nil {
		return
	}
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(*Object); ok {
		f.observe(holding{who: ipOwner{kind: kindNames[f.kind], namespace: o.namespace, name: o.name, uid: o.uid}})
		if f.owners != nil {
			f.owners.set(idOf(f.kind, o), nil)
		}
	}
}

// startedAt is when an object present at start-up began holding its
// addresses: a pod's status.startTime, else metadata.creationTimestamp;
// 0 when neither is readable.
func (o *Object) startedAt(kind string) (int64, string) {
	read := func(v []byte) int64 {
		s := jsonString(v)
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return 0
		}
		return t.UnixNano()
	}
	if kind == "pods" {
		status := o.doc("status")
		if t := read(status.Member("startTime")); t != 0 {
			return t, "start"
		}
	}
	metadata := o.doc("metadata")
	if t := read(metadata.Member("creationTimestamp")); t != 0 {
		return t, "creation"
	}
	return 0, ""
}

func jsonString(v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	s, _ := jsonscan.String(v)
	return s
}
