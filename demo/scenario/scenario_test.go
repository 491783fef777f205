package scenario

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// memStore is the least a Store can be: objects by resource and
// namespace/name, each with the resourceVersion of its last write.
type memStore struct {
	rv      uint64
	objects map[string]map[string]memObject
	failOn  string // Put of this resource fails
}

type memObject struct {
	rv  uint64
	raw []byte
}

func (m *memStore) Put(resource string, obj []byte) (uint64, error) {
	if resource == m.failOn {
		return 0, errors.New("refused")
	}
	var meta struct {
		Metadata struct{ Namespace, Name string } `json:"metadata"`
	}
	if err := json.Unmarshal(obj, &meta); err != nil {
		return 0, err
	}
	if m.objects == nil {
		m.objects = map[string]map[string]memObject{}
	}
	if m.objects[resource] == nil {
		m.objects[resource] = map[string]memObject{}
	}
	m.rv++
	m.objects[resource][meta.Metadata.Namespace+"/"+meta.Metadata.Name] = memObject{m.rv, obj}
	return m.rv, nil
}

func (m *memStore) Delete(resource, namespace, name string) error {
	if _, ok := m.objects[resource][namespace+"/"+name]; !ok {
		return errors.New("not found")
	}
	m.rv++
	delete(m.objects[resource], namespace+"/"+name)
	return nil
}

func (m *memStore) EachIn(resource string, keep func(string) bool, fn func(uint64, []byte)) {
	keys := make([]string, 0, len(m.objects[resource]))
	for k := range m.objects[resource] {
		if ns, _, _ := strings.Cut(k, "/"); keep == nil || keep(ns) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fn(m.objects[resource][k].rv, m.objects[resource][k].raw)
	}
}

func fixedClock() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

func TestChurnLeavesOtherObjectsAlone(t *testing.T) {
	t.Parallel()
	store := &memStore{}
	s, err := New(Options{Seed: 3, Now: fixedClock}, store)
	if err != nil {
		t.Fatal(err)
	}
	mine := []byte(`{"metadata":{"namespace":"shop","name":"mine","labels":{"app":"web"}},"spec":{"nodeName":"node-1"},"status":{"phase":"Pending"}}`)
	if _, err := store.Put(pods, mine); err != nil {
		t.Fatal(err)
	}
	for range 300 {
		if err := s.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if got := store.objects[pods]["shop/mine"].raw; string(got) != string(mine) {
		t.Errorf("churn changed an object it did not generate: %s", got)
	}
	var running int
	for _, o := range store.objects[pods] {
		var p corev1.Pod
		if err := json.Unmarshal(o.raw, &p); err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	if running == 0 {
		t.Error("no running pod after churn")
	}
}

func TestRefusedWriteIsAnError(t *testing.T) {
	t.Parallel()
	_, err := New(Options{Seed: 1, Now: fixedClock}, &memStore{failOn: services})
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), services) {
		t.Errorf("New over a store that refuses services: %v", err)
	}
	store := &memStore{}
	s, err := New(Options{Seed: 1, Now: fixedClock}, store)
	if err != nil {
		t.Fatal(err)
	}
	store.failOn = pods
	var stepErr error
	for range 50 {
		if stepErr = s.Step(); stepErr != nil {
			break
		}
	}
	if stepErr == nil || !strings.Contains(stepErr.Error(), "refused") {
		t.Errorf("Step over a store that refuses pods: %v", stepErr)
	}
}
