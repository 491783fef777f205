package fakeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/kubeindex/kubeindex/demo/internal/ids"
)

// ErrNotFound is returned by Delete for an object that does not exist.
var ErrNotFound = errors.New("fakeapi: object not found")

// Server is a fake Kubernetes API server: its objects, the cluster-wide
// resourceVersion, the retained event history and the open watches.
//
// All methods are safe for concurrent use. New starts no goroutine: every
// watch lives as long as its HTTP request.
type Server struct {
	opts Options

	mu          sync.Mutex
	rng         *rand.Rand                            // uids and generated names of created objects
	rv          uint64                                // last assigned resourceVersion
	objects     map[string]map[key]*object            // by resource plural
	byNamespace map[string]map[string]map[key]*object // the same objects by resource plural and namespace
	history     []event                               // consecutive RVs, oldest first
	historyFrom uint64                                // watches may resume from any RV >= this
	watchers    map[*watcher]struct{}
	unavailable bool
}

// event is one change, as retained in the history.
type event struct {
	typ string  // ADDED, MODIFIED or DELETED
	obj *object // after the change; for DELETED the last state at the deletion's RV
	old *object // before the change; nil for ADDED
}

// New returns an empty server. It starts no goroutine.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{
		opts:        opts,
		rng:         rand.New(rand.NewPCG(uint64(opts.Seed), 0x66616b65617069)),
		objects:     map[string]map[key]*object{},
		byNamespace: map[string]map[string]map[key]*object{},
		watchers:    map[*watcher]struct{}{},
	}
	for _, r := range resources {
		s.objects[r.plural] = map[key]*object{}
		s.byNamespace[r.plural] = map[string]map[key]*object{}
	}
	return s
}

// ForgetHistory makes the objects stored so far the starting point: they
// are not in the watch history, so a watch must start from a
// resourceVersion a list returned. A generator calls it once it has
// written the initial objects.
func (s *Server) ForgetHistory() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = nil
	s.historyFrom = s.rv
}

// Put creates or updates an object of resource (a plural such as "pods" or
// "deployments") from its JSON, as a write to an API server does: it
// assigns the next resourceVersion; on create it assigns a uid and a
// creationTimestamp when the object has none, and a name from
// metadata.generateName; an update keeps the stored uid and
// creationTimestamp. Watches get ADDED or MODIFIED. Namespaced objects need
// metadata.namespace; the namespace need not exist. apiVersion and kind
// may be omitted. Objects are stored with their keys in sorted order. It
// returns the resourceVersion assigned.
func (s *Server) Put(resource string, obj []byte) (rv uint64, err error) {
	r, err := resourceByName(resource)
	if err != nil {
		return 0, err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return 0, fmt.Errorf("fakeapi: %s: not a JSON object: %v", resource, err)
	}
	if err := checkTypeMeta(r, m); err != nil {
		return 0, err
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		m["metadata"] = md
	}
	ns, _ := md["namespace"].(string)
	if r.namespaced != (ns != "") {
		return 0, fmt.Errorf("fakeapi: %s: metadata.namespace %q: the resource is namespaced=%v", resource, ns, r.namespaced)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name, _ := md["name"].(string)
	if gen, _ := md["generateName"].(string); name == "" && gen != "" {
		name = gen + s.suffix(5)
		md["name"] = name
	}
	if name == "" {
		return 0, fmt.Errorf("fakeapi: %s: metadata.name is required", resource)
	}
	if old := s.objects[r.plural][key{ns, name}]; old != nil {
		md["uid"], md["creationTimestamp"] = old.uid, old.created
	} else {
		if uid, _ := md["uid"].(string); uid == "" {
			md["uid"] = s.newUID()
		}
		if ts, _ := md["creationTimestamp"].(string); ts == "" {
			md["creationTimestamp"] = s.opts.Now().UTC().Format(time.RFC3339)
		}
	}
	if err := s.put(r, m); err != nil {
		return 0, err
	}
	return s.rv, nil
}

func checkTypeMeta(r *resource, m map[string]any) error {
	if v, ok := m["apiVersion"]; ok && v != r.apiVersion() {
		return fmt.Errorf("fakeapi: %s: apiVersion %v, want %s", r.plural, v, r.apiVersion())
	}
	if v, ok := m["kind"]; ok && v != r.kind {
		return fmt.Errorf("fakeapi: %s: kind %v, want %s", r.plural, v, r.kind)
	}
	return nil
}

// Delete removes an object; watches get DELETED carrying its last state at
// the deletion's resourceVersion. namespace is "" for cluster-scoped
// resources. Deleting a namespace does not delete what is in it.
func (s *Server) Delete(resource, namespace, name string) error {
	r, err := resourceByName(resource)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remove(r, key{namespace, name})
}

// Each calls fn with every current object of resource, with apiVersion
// and kind, ordered by namespace then name, and with the resourceVersion
// it was stored at (unique to that state of that object). fn must not
// change obj; it runs without the server's lock, on a snapshot, so it may
// call the server. Each does nothing for an unknown resource.
func (s *Server) Each(resource string, fn func(rv uint64, obj []byte)) {
	s.EachIn(resource, nil, fn)
}

// ResourceVersion returns the cluster-wide resourceVersion of the last change.
func (s *Server) ResourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.rv)
}

func (s *Server) isUnavailable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unavailable
}

// sorted returns the objects of m in list order. Callers hold s.mu or own m.
func sorted(m map[key]*object) []*object {
	out := make([]*object, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *object) int {
		if a.key().less(b.key()) {
			return -1
		}
		if b.key().less(a.key()) {
			return 1
		}
		return 0
	})
	return out
}

// put stores m as the new state of its object, assigning the next
// resourceVersion, and records ADDED or MODIFIED. s.mu must be held.
func (s *Server) put(r *resource, m map[string]any) error {
	md := m["metadata"].(map[string]any)
	md["resourceVersion"] = fmt.Sprint(s.rv + 1)
	o, err := newObject(r, m)
	if err != nil {
		return err
	}
	if o.name == "" || r.namespaced != (o.namespace != "") {
		return fmt.Errorf("fakeapi: %s %s/%s: bad name or namespace", r.plural, o.namespace, o.name)
	}
	s.commit(r, o)
	return nil
}

// commit makes o, built at the next resourceVersion, the new state of its
// object and records ADDED or MODIFIED. s.mu must be held.
func (s *Server) commit(r *resource, o *object) {
	s.rv++
	old := s.objects[r.plural][o.key()]
	s.store(r, o)
	typ := "MODIFIED"
	if old == nil {
		typ = "ADDED"
	}
	s.record(event{typ: typ, obj: o, old: old})
}

// store makes o the current state of its object. s.mu must be held.
func (s *Server) store(r *resource, o *object) {
	s.objects[r.plural][o.key()] = o
	ns := s.byNamespace[r.plural][o.namespace]
	if ns == nil {
		ns = map[key]*object{}
		s.byNamespace[r.plural][o.namespace] = ns
	}
	ns[o.key()] = o
}

// remove deletes the object at k and records DELETED. s.mu must be held.
func (s *Server) remove(r *resource, k key) error {
	old := s.objects[r.plural][k]
	if old == nil {
		return fmt.Errorf("%w: %s %q in namespace %q", ErrNotFound, r.plural, k.name, k.namespace)
	}
	last, err := withResourceVersion(old, s.rv+1)
	if err != nil {
		return err
	}
	s.rv++
	delete(s.objects[r.plural], k)
	delete(s.byNamespace[r.plural][k.namespace], k)
	s.record(event{typ: "DELETED", obj: last, old: old})
	return nil
}

// withResourceVersion returns o re-encoded at resourceVersion rv.
func withResourceVersion(o *object, rv uint64) (*object, error) {
	m := o.decode()
	m["metadata"].(map[string]any)["resourceVersion"] = fmt.Sprint(rv)
	return newObject(o.res, m)
}

// newUID returns a seeded random UUID. s.mu must be held.
func (s *Server) newUID() string { return ids.UID(s.rng) }

// suffix returns n seeded random name characters. s.mu must be held.
func (s *Server) suffix(n int) string { return ids.Suffix(s.rng, n) }
