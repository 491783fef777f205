package cache

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/indexers"
)

// An object as a list is read (inList) gives every index function the
// values the object stored gives: prepare reads spec and status from the
// list's bytes, the handler and every later reader from the object.
func TestInListValues(t *testing.T) {
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	specs := append(benchIndexes(),
		indexers.Spec{Name: "mounts", Path: "spec.containers.#.volumeMounts.#.name"}, // across the token volume's name
		indexers.Spec{Name: "volumes", Path: "spec.volumes.#.name"},
		indexers.Spec{Name: "ready", Path: "status.containerStatuses.#.ready"},
		indexers.Spec{Name: "whole", Path: "metadata.name"},
	)
	dup := strings.Replace(string(pod), `"spec":{`, `"spec":{"nodeName":"first"},"spec":{`, 1) // the first spec is the one read
	for name, tc := range map[string]struct {
		in    string
		shape Shape
		// inPlace: spec comes from the list's bytes, and the object
		// stores its containers in pieces (the case inList is for).
		inPlace bool
	}{
		"pod":             {in: string(pod), shape: Shape{APIVersion: "v1", Kind: "Pod"}, inPlace: true},
		"redacted":        {in: string(pod), shape: Shape{APIVersion: "v1", Kind: "Pod", Drop: []string{"spec.containers"}}},
		"duplicate spec":  {in: dup, shape: Shape{APIVersion: "v1", Kind: "Pod"}},
		"no status":       {in: `{"metadata":{"name":"a","managedFields":[{"m":1}]},"spec":{"nodeName":"n","containers":[{"image":"i"}]}}`, shape: Shape{}},
		"spec not object": {in: `{"metadata":{"name":"a"},"spec":[1],"status":{"podIP":"10.0.0.1"}}`, shape: Shape{}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := tc.shape.Build([]byte(tc.in)); err != nil { // a value seen twice becomes a chunk
				t.Fatal(err)
			}
			var l inList
			var n int
			in := []byte(tc.in)
			l.Object, n, err = tc.shape.build(in, &l.input)
			if err != nil || n != len(tc.in) {
				t.Fatalf("build: %d of %d bytes, %v", n, len(tc.in), err)
			}
			if tc.inPlace {
				if l.input[1].Raw == nil || l.input[1].Keys == nil {
					t.Fatal("spec not taken from the list's bytes")
				}
				if d := l.Object.doc("spec"); d.Pieces == nil {
					t.Fatal("the stored spec is not in pieces: the test no longer covers what inList is for")
				}
			}
			if len(tc.shape.Drop) > 0 && (l.input[1].Raw != nil || l.input[2].Raw != nil) {
				t.Fatal("a redacted object's sections taken from the list's bytes")
			}
			got := map[string][]string{}
			for _, s := range specs {
				got[s.Name], _ = objectIndexFunc(s.Rooted())(&l)
			}
			// The values outlive the list's bytes (the stream's buffer,
			// overwritten by the next read): they hold none of them.
			for i := range in {
				in[i] = 'x'
			}
			for _, s := range specs {
				want, _ := objectIndexFunc(s.Rooted())(l.Object)
				if !slices.Equal(got[s.Name], want) {
					t.Errorf("%s: %q from the list's bytes, %q from the object", s.Name, got[s.Name], want)
				}
			}
		})
	}
}
