package cache

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

func gizmoCRD(columns ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos.example.com"},
		"spec": map[string]any{"group": "example.com", "versions": []any{
			map[string]any{"name": "v1", "additionalPrinterColumns": columns}}},
	}}
}

func newCRDWatch(objs ...runtime.Object) (*crdWatch, *dynamicfake.FakeDynamicClient) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdGVR: "CustomResourceDefinitionList"}, objs...)
	return &crdWatch{name: "gizmos.example.com", client: client.Resource(crdGVR), base: client}, client
}

// TestCRDWatchFollowsTheCRD: read, then each change of the CRD is seen.
func TestCRDWatchFollowsTheCRD(t *testing.T) {
	w, client := newCRDWatch(gizmoCRD())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() { w.run(ctx, slog.New(slog.DiscardHandler)); close(done) }()
	defer func() { cancel(); <-done }()
	waitForCRD(t, "the CRD to be read", func() bool { return CRDState(w.state.Load()) == CRDKnown })

	updated := gizmoCRD(map[string]any{"name": "Shape", "type": "string", "jsonPath": ".spec.shape"})
	if _, err := client.Resource(crdGVR).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForCRD(t, "the update to be seen", func() bool {
		p := w.raw.Load()
		return p != nil && bytes.Contains(*p, []byte(`"Shape"`))
	})
}

// TestCRDWatchStates: a resource no CRD defines, and a CRD that may not be
// read, settle at once and are not asked for again.
func TestCRDWatchStates(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want CRDState
	}{
		"not a CRD": {apierrors.NewNotFound(crdGVR.GroupResource(), "gizmos.example.com"), CRDNone},
		"forbidden": {apierrors.NewForbidden(crdGVR.GroupResource(), "gizmos.example.com", nil), CRDUnreadable},
	} {
		t.Run(name, func(t *testing.T) {
			w, client := newCRDWatch()
			gets := 0
			client.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				return true, nil, tc.err
			})
			w.run(t.Context(), slog.New(slog.DiscardHandler)) // returns: nothing to follow
			if got := CRDState(w.state.Load()); got != tc.want || gets != 1 {
				t.Errorf("state %v after %d requests; want %v after 1", got, gets, tc.want)
			}
		})
	}
}

func waitForCRD(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
