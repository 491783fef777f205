package scenario

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GitVersion is the Kubernetes version the scenario's nodes run and its
// kube-proxy image is tagged with; the "-demo" suffix labels it simulated.
const GitVersion = "v1.37.0-demo"

// SimulatedAnnotation marks every generated object as simulated.
const SimulatedAnnotation = "kubeindex.dev/simulated"

// Resource names, as the Store knows them.
const (
	pods        = "pods"
	services    = "services"
	nodes       = "nodes"
	namespaces  = "namespaces"
	deployments = "deployments"
	replicaSets = "replicasets"
)

// Store is where the scenario writes its objects and reads them back: an
// API server's storage. Put creates or updates from JSON and returns the
// resourceVersion it assigned; EachIn visits the current objects of a
// resource whose namespace keep accepts (all when keep is nil) in
// namespace/name order with the resourceVersion each is stored at.
type Store interface {
	Put(resource string, obj []byte) (rv uint64, err error)
	Delete(resource, namespace, name string) error
	EachIn(resource string, keep func(namespace string) bool, fn func(rv uint64, obj []byte))
}

// Scenario generates a cluster into a Store and changes it step by step.
// Its methods are safe for concurrent use; a step is one change made
// under the scenario's lock.
type Scenario struct {
	opts  Options
	store Store

	mu         sync.Mutex
	rng        *rand.Rand
	nodes      []node
	serviceIPs int
	jobs       int
	keep       key                         // the completed pod kept to show IP reuse
	mine       func(namespace string) bool // see mineFunc
	decoded    map[string]map[uint64]any   // typed objects by resource and resourceVersion
}

// key is an object's namespace and name.
type key struct{ namespace, name string }

func keyOf(m *metav1.ObjectMeta) key { return key{m.Namespace, m.Name} }

// New generates the initial objects of a cluster from opts into store. It
// starts no goroutine. It fails only when the store refuses an object.
func New(opts Options, store Store) (s *Scenario, err error) {
	opts = opts.withDefaults()
	s = &Scenario{
		opts:    opts,
		store:   store,
		rng:     rand.New(rand.NewPCG(uint64(opts.Seed), 0x6b756265696e6478)),
		decoded: map[string]map[uint64]any{},
	}
	s.mine = s.mineFunc()
	defer recoverStoreError(&err)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.generate()
	return s, nil
}

// storeError is a write the store refused: generated objects are
// well-formed, so it means a bug here or a broken store.
type storeError struct{ err error }

// recoverStoreError turns a refused write, raised deep in a change, into
// the error of the call that made it.
func recoverStoreError(err *error) {
	if r := recover(); r != nil {
		se, ok := r.(storeError)
		if !ok {
			panic(r)
		}
		*err = se.err
	}
}

// put writes a generated object and takes it: the next list hands it out
// as the stored state instead of decoding what was written. s.mu must be
// held.
func (s *Scenario) put(resource string, obj metav1.Object) {
	b, err := json.Marshal(obj)
	var rv uint64
	if err == nil {
		rv, err = s.store.Put(resource, b)
	}
	if err != nil {
		panic(storeError{fmt.Errorf("scenario: writing %s: %w", resource, err)})
	}
	obj.SetResourceVersion(strconv.FormatUint(rv, 10))
	if s.decoded[resource] == nil {
		s.decoded[resource] = map[uint64]any{}
	}
	s.decoded[resource][rv] = obj
}

// remove deletes an object. s.mu must be held.
func (s *Scenario) remove(resource string, k key) bool {
	return s.store.Delete(resource, k.namespace, k.name) == nil
}

// list returns the current objects of resource, decoded as T, in
// namespace/name order. The objects are shared: callers copy one before
// changing it. Each state of an object is decoded once. s.mu must be held.
func list[T any](s *Scenario, resource string) []*T {
	prev := s.decoded[resource]
	next := make(map[uint64]any, len(prev))
	var out []*T
	s.store.EachIn(resource, s.mine, func(rv uint64, raw []byte) {
		v, ok := prev[rv].(*T)
		if !ok {
			v = new(T)
			if err := json.Unmarshal(raw, v); err != nil {
				panic(storeError{fmt.Errorf("scenario: reading %s: %w", resource, err)})
			}
		}
		next[rv] = v
		out = append(out, v)
	})
	s.decoded[resource] = next
	return out
}

// mineFunc returns what accepts the namespaces the scenario reads: all
// but those Options.Skip names; nil when it reads all.
func (s *Scenario) mineFunc() func(string) bool {
	if s.opts.Skip == nil {
		return nil
	}
	return func(ns string) bool { return !s.opts.Skip(ns) }
}

// Node is a node of the scenario, as another generator places pods on it.
type Node struct {
	Name string
	IPv4 string // its InternalIP, a pod's hostIP
}

// Nodes returns the scenario's nodes, in order.
func (s *Scenario) Nodes() []Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Node, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = Node{Name: n.name, IPv4: n.ipv4}
	}
	return out
}

// simulated reports whether the scenario generated the object, and so may
// change it.
func simulated(m *metav1.ObjectMeta) bool { return m.Annotations[SimulatedAnnotation] == "true" }

// owner returns the first owner reference of an object.
func owner(m *metav1.ObjectMeta) metav1.OwnerReference {
	if len(m.OwnerReferences) == 0 {
		return metav1.OwnerReference{}
	}
	return m.OwnerReferences[0]
}
