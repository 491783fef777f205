// Package crowd adds many pods to the simulated cluster: as many as
// kubeindex --demo-pods asks for, spread
// over namespaces of their own and the scenario's nodes, in varied states
// (running, not ready, pending, crash-looping, evicted), with restarts and
// ages, and changing a few at a time while the demo runs.
//
// The crowd's pods are bare pods (no Deployment or ReplicaSet owns them),
// written as JSON the crowd renders itself, straight into the fake API
// server's storage, so that a start at scale stays fast. They carry the
// simulated annotation like every generated object. Their addresses come
// from 10.128.0.0/9, one per slot, apart from the scenario's node ranges.
package crowd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kubeindex/kubeindex/demo/internal/ids"
)

// PodsPerNamespace is about how many pods each of the crowd's namespaces
// holds.
const PodsPerNamespace = 2000

// MaxPods is the most pods a crowd holds: one address each in
// 10.128.0.0/9.
const MaxPods = 1 << 23

// Store is where the crowd writes: the fake API server's storage. Put
// writes a namespace; Load writes the initial pods, rendered concurrently,
// without events; Write and Delete change one pod, with events.
type Store interface {
	Put(resource string, obj []byte) (rv uint64, err error)
	Load(resource string, n int, render func(i int, rv uint64) ([]byte, error)) error
	Write(resource string, render func(rv uint64) ([]byte, error)) error
	Delete(resource, namespace, name string) error
}

// Node is where a pod runs: the node's name and its address (the pod's
// hostIP).
type Node struct{ Name, IP string }

// Options configure a crowd.
type Options struct {
	// Seed makes generation and churn deterministic.
	Seed int64
	// Pods is the size of the cluster the crowd belongs to; it decides how
	// many namespaces the crowd has (one per PodsPerNamespace pods).
	Pods int
	// Now is the clock for timestamps (default time.Now).
	Now func() time.Time
}

// Crowd is a set of generated pods. Its methods are safe for concurrent
// use.
type Crowd struct {
	now        func() time.Time
	namespaces []string
	owns       map[string]bool
	hashes     []string // pod-template-hash per namespace and app

	mu      sync.Mutex
	rng     *rand.Rand
	store   Store
	nodes   []Node
	members []member          // one per slot; a slot's address is fixed
	names   []map[string]bool // the names in use, per namespace
}

// New plans a crowd: its namespaces are known (Owns answers) before
// Populate writes anything.
func New(opts Options) *Crowd {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Crowd{now: opts.Now, owns: map[string]bool{},
		rng: rand.New(rand.NewPCG(uint64(opts.Seed), 0x63726f7764))}
	n := max(1, (opts.Pods+PodsPerNamespace-1)/PodsPerNamespace)
	for i := range n {
		ns := fmt.Sprintf("%s-%02d", teams[i%len(teams)], i/len(teams)+1)
		c.namespaces = append(c.namespaces, ns)
		c.owns[ns] = true
		for range apps {
			c.hashes = append(c.hashes, ids.Suffix(c.rng, 10))
		}
	}
	return c
}

// Owns reports whether namespace is one of the crowd's.
func (c *Crowd) Owns(namespace string) bool { return c.owns[namespace] }

// Populate writes the crowd's namespaces and n pods on nodes into store.
// It is called once, before any watch is open.
func (c *Crowd) Populate(store Store, nodes []Node, n int) error {
	if n < 0 || n > MaxPods {
		return fmt.Errorf("crowd: %d pods: want 0 to %d", n, MaxPods)
	}
	if len(nodes) == 0 {
		return fmt.Errorf("crowd: no nodes to place pods on")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store, c.nodes = store, nodes
	now := c.now().UTC().Truncate(time.Second)
	for _, ns := range c.namespaces {
		obj := fmt.Sprintf(`{"metadata":{"name":%q,"labels":{"kubernetes.io/metadata.name":%q,"team":%q},`+
			`"annotations":{%q:"true"}},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}`,
			ns, ns, ns, simulated)
		if _, err := store.Put("namespaces", []byte(obj)); err != nil {
			return fmt.Errorf("crowd: namespace %s: %w", ns, err)
		}
	}
	c.names = make([]map[string]bool, len(c.namespaces))
	for i := range c.names {
		c.names[i] = map[string]bool{}
	}
	c.members = make([]member, n)
	for i := range c.members {
		c.members[i] = c.born(now, true)
	}
	return store.Load("pods", n, func(i int, rv uint64) ([]byte, error) {
		return c.render(&c.members[i], i, rv), nil
	})
}

// born makes a new member: at the start, of any age and state; later, a
// replacement just created, Pending. c.mu must be held.
func (c *Crowd) born(now time.Time, initial bool) member {
	m := member{
		ns:   int32(c.rng.IntN(len(c.namespaces))),
		app:  int32(c.rng.IntN(len(apps))),
		node: int32(c.rng.IntN(len(c.nodes))),
		uid:  ids.UID(c.rng),
		seed: c.rng.Uint64(),
	}
	for m.name == "" || c.names[m.ns][m.name] {
		m.name = fmt.Sprintf("%s-%s-%s", apps[m.app].name, c.hashes[int(m.ns)*len(apps)+int(m.app)], ids.Suffix(c.rng, 5))
	}
	c.names[m.ns][m.name] = true
	m.created, m.state = now, pending
	if initial {
		// Ages: most pods days old, a few minutes, some months.
		age := time.Duration(math.Min(c.rng.ExpFloat64()*5*24, 400*24) * float64(time.Hour))
		m.created = now.Add(-age.Truncate(time.Second))
		switch r := c.rng.Float64(); {
		case r < 0.86:
			m.state = running
		case r < 0.90:
			m.state = notReady
		case r < 0.93:
			m.state, m.created = pending, now.Add(-time.Duration(c.rng.IntN(300))*time.Second)
		case r < 0.97:
			m.state = crashLoop
		default:
			m.state = evicted
		}
		if m.state == crashLoop || c.rng.Float64() < 0.3 {
			m.restarts = int32(c.rng.ExpFloat64()*4) + 1
		}
		if m.state == crashLoop {
			m.restarts += 4
		}
	}
	m.changed = m.created.Add(time.Duration(3+c.rng.IntN(20)) * time.Second)
	if m.restarts > 0 || m.state != running {
		m.changed = m.created.Add(time.Duration(c.rng.Float64() * float64(now.Sub(m.created))))
	}
	if m.changed.After(now) {
		m.changed = now
	}
	return m
}

// Step makes the changes of one churn step: one per 20,000 pods, at least
// one. A change restarts a container (sometimes into CrashLoopBackOff),
// turns a pod not ready and back, starts a Pending pod, evicts one, or
// replaces one (deleted, and a new Pending pod created in its slot).
func (c *Crowd) Step() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.members) == 0 {
		return nil
	}
	for range max(1, len(c.members)/20000) {
		if err := c.change(c.rng.IntN(len(c.members))); err != nil {
			return err
		}
	}
	return nil
}

// change changes the pod in slot i. c.mu must be held.
func (c *Crowd) change(i int) error {
	m := &c.members[i]
	now := c.now().UTC().Truncate(time.Second)
	r := c.rng.Float64()
	switch m.state {
	case pending, notReady:
		m.state = running
	case crashLoop:
		m.state = running
		if r < 0.5 {
			m.state = crashLoop
			m.restarts++
		}
	case evicted:
		return c.replace(i, now)
	default:
		switch {
		case r < 0.35:
			m.restarts++
			if r < 0.1 {
				m.state = crashLoop
			}
		case r < 0.65:
			m.state = notReady
		case r < 0.7:
			m.state = evicted
		case r < 0.85:
			return c.replace(i, now)
		}
	}
	m.changed = now
	return c.store.Write("pods", func(rv uint64) ([]byte, error) { return c.render(m, i, rv), nil })
}

// replace deletes the pod in slot i and creates a new one there. c.mu must
// be held.
func (c *Crowd) replace(i int, now time.Time) error {
	old := c.members[i]
	if err := c.store.Delete("pods", c.namespaces[old.ns], old.name); err != nil {
		return fmt.Errorf("crowd: %w", err)
	}
	delete(c.names[old.ns], old.name)
	c.members[i] = c.born(now, false)
	m := &c.members[i]
	return c.store.Write("pods", func(rv uint64) ([]byte, error) { return c.render(m, i, rv), nil })
}
