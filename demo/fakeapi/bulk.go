package fakeapi

import (
	"fmt"
	"maps"
	"runtime"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// Load stores n new objects of resource, object i rendered by render(i, rv)
// at its own resourceVersion (as Write renders one), and records no event: it is for a
// generator's initial objects, when no watch is open yet, and it forgets
// the history as ForgetHistory does (the loaded objects are part of the
// starting point a watch must list first). render runs on up to GOMAXPROCS goroutines at once, so it must be
// safe for that. An object that exists already, or a body that does not
// carry its resourceVersion, name or namespace as resource needs, fails
// the whole load and stores nothing.
func (s *Server) Load(resource string, n int, render func(i int, rv uint64) ([]byte, error)) error {
	r, err := resourceByName(resource)
	if err != nil {
		return err
	}
	s.mu.Lock()
	first := s.rv + 1
	s.rv += uint64(n) // reserved: nothing else may take these versions
	s.mu.Unlock()
	objs := make([]*object, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), max(n, 1))
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				objs[i], errs[i] = rendered(r, first+uint64(i), func(rv uint64) ([]byte, error) { return render(i, rv) })
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	// The reserved versions have no events, failed or not: the history
	// starts after them.
	s.history = nil
	s.historyFrom = s.rv
	seen := make(map[key]bool, n)
	for i, o := range objs {
		if errs[i] == nil && (s.objects[r.plural][o.key()] != nil || seen[o.key()]) {
			errs[i] = fmt.Errorf("fakeapi: load %s %s/%s: it exists", r.plural, o.namespace, o.name)
		}
		if errs[i] != nil {
			return errs[i]
		}
		seen[o.key()] = true
	}
	for _, o := range objs {
		s.store(r, o)
	}
	return nil
}

// Write creates or updates an object of resource rendered by render at the
// next resourceVersion, as Put does (watches get ADDED or MODIFIED), but
// without decoding and re-encoding it: render(rv) writes the stored JSON,
// without apiVersion and kind, with metadata.resourceVersion set to rv and
// the uid and creationTimestamp the object is to keep. It is how a
// generator of many objects writes them cheaply. render runs under the
// server's lock: it must not call the server.
func (s *Server) Write(resource string, render func(rv uint64) ([]byte, error)) error {
	r, err := resourceByName(resource)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, err := rendered(r, s.rv+1, render)
	if err != nil {
		return err
	}
	s.commit(r, o)
	return nil
}

// rendered builds the object render writes at rv and checks that it is
// one: a JSON object carrying rv, a name, and a namespace exactly when r is
// namespaced.
func rendered(r *resource, rv uint64, render func(rv uint64) ([]byte, error)) (*object, error) {
	body, err := render(rv)
	if err != nil {
		return nil, err
	}
	if !gjson.ValidBytes(body) || !strings.HasPrefix(string(body), "{") {
		return nil, fmt.Errorf("fakeapi: %s: the rendered object is not a JSON object", r.plural)
	}
	o := objectOf(r, body)
	if o.rv != rv || o.name == "" || r.namespaced != (o.namespace != "") || o.uid == "" || o.created == "" {
		return nil, fmt.Errorf("fakeapi: %s %s/%s: rendered with resourceVersion %d (want %d), uid %q, creationTimestamp %q",
			r.plural, o.namespace, o.name, o.rv, rv, o.uid, o.created)
	}
	return o, nil
}

// EachIn is Each over the objects whose namespace keep accepts (every one
// when keep is nil): a generator that shares the server with another reads
// only its own namespaces, without sorting the others'.
func (s *Server) EachIn(resource string, keep func(namespace string) bool, fn func(rv uint64, obj []byte)) {
	r, err := resourceByName(resource)
	if err != nil {
		return
	}
	s.mu.Lock()
	objs := s.objects[r.plural]
	if keep != nil {
		objs = map[key]*object{}
		for ns, in := range s.byNamespace[r.plural] {
			if keep(ns) {
				maps.Copy(objs, in)
			}
		}
	}
	list := sorted(objs)
	s.mu.Unlock()
	for _, o := range list {
		fn(o.rv, o.full)
	}
}
