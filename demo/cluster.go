package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
)

// ErrNotFound is returned by Delete for an object that does not exist.
var ErrNotFound = errors.New("demo: object not found")

// Cluster is a simulated cluster: its objects, the cluster-wide
// resourceVersion, the retained event history and the open watches.
//
// All methods are safe for concurrent use. New starts no goroutine: Run
// owns the churn loop and every watch lives as long as its HTTP request.
type Cluster struct {
	opts Options

	mu          sync.Mutex
	rng         *rand.Rand
	rv          uint64                     // last assigned resourceVersion
	objects     map[string]map[key]*object // by resource plural
	history     []event                    // consecutive RVs, oldest first
	historyFrom uint64                     // watches may resume from any RV >= this
	watchers    map[*watcher]struct{}
	unavailable bool
	sim         simState
}

// event is one change, as retained in the history.
type event struct {
	typ string  // ADDED, MODIFIED or DELETED
	obj *object // after the change; for DELETED the last state at the deletion's RV
	old *object // before the change; nil for ADDED
}

// New generates the initial objects of a cluster from opts. It starts no
// goroutine. The initial objects are not in the watch history: a watch must
// start from a resourceVersion a list returned.
func New(opts Options) *Cluster {
	opts = opts.withDefaults()
	c := &Cluster{
		opts:     opts,
		rng:      rand.New(rand.NewPCG(uint64(opts.Seed), 0x6b756265696e6478)),
		objects:  map[string]map[key]*object{},
		watchers: map[*watcher]struct{}{},
	}
	for _, r := range resources {
		c.objects[r.plural] = map[key]*object{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generate()
	c.history = nil
	c.historyFrom = c.rv
	return c
}

// Apply creates or updates an object of resource (a plural such as "pods"
// or "deployments") from its JSON. It assigns the resourceVersion, and on
// create the uid and creationTimestamp (an update keeps the stored ones);
// it adds managedFields when the object has none. Watches get ADDED or
// MODIFIED. Namespaced objects need metadata.namespace; the namespace need
// not exist. apiVersion and kind may be omitted.
func (c *Cluster) Apply(resource string, obj []byte) error {
	r, err := resourceByName(resource)
	if err != nil {
		return err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return fmt.Errorf("demo: %s: not a JSON object: %v", resource, err)
	}
	if err := checkTypeMeta(r, m); err != nil {
		return err
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		m["metadata"] = md
	}
	ns, _ := md["namespace"].(string)
	if r.namespaced != (ns != "") {
		return fmt.Errorf("demo: %s: metadata.namespace %q: the resource is namespaced=%v", resource, ns, r.namespaced)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	name, _ := md["name"].(string)
	if gen, _ := md["generateName"].(string); name == "" && gen != "" {
		name = gen + c.suffix(5)
		md["name"] = name
	}
	if name == "" {
		return fmt.Errorf("demo: %s: metadata.name is required", resource)
	}
	now := c.timestamp()
	if old := c.objects[r.plural][key{ns, name}]; old != nil {
		md["uid"] = old.uid
		md["creationTimestamp"] = old.get("metadata.creationTimestamp").String()
	} else {
		md["uid"] = c.newUID()
		md["creationTimestamp"] = now
	}
	if _, ok := md["managedFields"]; !ok {
		md["managedFields"] = managedFields(m, now, fieldManager{"kubeindex-demo-apply", "Update", "", r.apiVersion(), []string{"metadata", "spec"}})
	}
	_, err = c.put(r, m)
	return err
}

func checkTypeMeta(r *resource, m map[string]any) error {
	if v, ok := m["apiVersion"]; ok && v != r.apiVersion() {
		return fmt.Errorf("demo: %s: apiVersion %v, want %s", r.plural, v, r.apiVersion())
	}
	if v, ok := m["kind"]; ok && v != r.kind {
		return fmt.Errorf("demo: %s: kind %v, want %s", r.plural, v, r.kind)
	}
	return nil
}

// Delete removes an object; watches get DELETED carrying its last state at
// the deletion's resourceVersion. namespace is "" for cluster-scoped
// resources. Deleting a namespace does not delete what is in it.
func (c *Cluster) Delete(resource, namespace, name string) error {
	r, err := resourceByName(resource)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.remove(r, key{namespace, name})
}

// Objects returns the current objects of resource, with apiVersion and
// kind, ordered by namespace then name. The caller owns the slices. It
// returns nil for an unknown resource.
func (c *Cluster) Objects(resource string) [][]byte {
	r, err := resourceByName(resource)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	objs := c.sorted(c.objects[r.plural])
	c.mu.Unlock()
	out := make([][]byte, len(objs))
	for i, o := range objs {
		out[i] = copyBytes(o.full)
	}
	return out
}

// ResourceVersion returns the cluster-wide resourceVersion of the last change.
func (c *Cluster) ResourceVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.rv)
}

// SetUnavailable starts (true) or ends (false) a simulated API-server
// outage: while it lasts every request is answered 503, and starting it
// closes every open watch, as a real outage drops connections.
func (c *Cluster) SetUnavailable(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unavailable = down
	if down {
		c.stopAllWatchers()
	}
}

func (c *Cluster) isUnavailable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unavailable
}

// sorted returns the objects of m in list order. Callers hold c.mu or own m.
func (c *Cluster) sorted(m map[key]*object) []*object {
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
// resourceVersion, and records ADDED or MODIFIED. c.mu must be held.
func (c *Cluster) put(r *resource, m map[string]any) (*object, error) {
	md := m["metadata"].(map[string]any)
	md["resourceVersion"] = fmt.Sprint(c.rv + 1)
	o, err := newObject(r, m)
	if err != nil {
		return nil, err
	}
	if o.name == "" || r.namespaced != (o.namespace != "") {
		return nil, fmt.Errorf("demo: %s %s/%s: bad name or namespace", r.plural, o.namespace, o.name)
	}
	c.rv++
	old := c.objects[r.plural][o.key()]
	c.objects[r.plural][o.key()] = o
	typ := "MODIFIED"
	if old == nil {
		typ = "ADDED"
	}
	c.record(event{typ: typ, obj: o, old: old})
	return o, nil
}

// remove deletes the object at k and records DELETED. c.mu must be held.
func (c *Cluster) remove(r *resource, k key) error {
	old := c.objects[r.plural][k]
	if old == nil {
		return fmt.Errorf("%w: %s %q in namespace %q", ErrNotFound, r.plural, k.name, k.namespace)
	}
	last, err := withResourceVersion(old, c.rv+1)
	if err != nil {
		return err
	}
	c.rv++
	delete(c.objects[r.plural], k)
	c.record(event{typ: "DELETED", obj: last, old: old})
	return nil
}

// withResourceVersion returns o re-encoded at resourceVersion rv.
func withResourceVersion(o *object, rv uint64) (*object, error) {
	m := o.decode()
	m["metadata"].(map[string]any)["resourceVersion"] = fmt.Sprint(rv)
	return newObject(o.res, m)
}
