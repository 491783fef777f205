package cluster

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// The Widget custom resource: widgets.example.com/v1, namespaced, with
// spec.color (string), spec.size (integer) and spec.tags (array of strings)
// to index by JSON path.
var (
	WidgetGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	crdGVR    = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
)

// WidgetColors are the spec.color values Seed uses, in turn.
var WidgetColors = []string{"red", "green", "blue"}

// WidgetCRD is the CustomResourceDefinition of widgets.example.com.
func WidgetCRD() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList", ShortNames: []string{"wd"},
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"color": {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"red"`)}, {Raw: []byte(`"green"`)}, {Raw: []byte(`"blue"`)}}},
							"size":  {Type: "integer", Minimum: ptr.To(0.0)},
							"tags":  {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}},
						}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"phase": str,
						}},
					},
				}},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "Color", Type: "string", JSONPath: ".spec.color"},
				},
				SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".spec.color"}, {JSONPath: ".spec.size"}},
			}},
		},
	}
}

// EnsureWidgetCRD creates the Widget CRD unless it exists, and waits until
// widgets can be created. Safe to call from several seeds at once.
func EnsureWidgetCRD(ctx context.Context, dyn dynamic.Interface) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(WidgetCRD())
	if err != nil {
		return err
	}
	_, err = dyn.Resource(crdGVR).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Established means the API server serves the resource; the dynamic
	// client may still see 404 for a moment, which creating retries.
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(crdGVR).Get(ctx, WidgetCRD().Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

func (s *seeder) widgets(ctx context.Context) error {
	if err := EnsureWidgetCRD(ctx, s.dyn); err != nil {
		return fmt.Errorf("widget CRD: %w", err)
	}
	n := 0
	for _, ns := range s.out.Namespaces {
		for i := range s.o.Widgets {
			color := WidgetColors[n%len(WidgetColors)]
			tags := []any{"tier-" + fmt.Sprint(i%2), color}
			if i == 0 {
				tags = append(tags, "first")
			}
			w := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1",
				"kind":       "Widget",
				"metadata": map[string]any{
					"name": fmt.Sprintf("widget-%d", i), "namespace": ns,
					"labels": map[string]any{SeedLabel: s.o.Prefix, "color": color},
				},
				"spec": map[string]any{"color": color, "size": int64(n + 1), "tags": tags},
			}}
			created, err := createRetryingNotFound(ctx, s.dyn.Resource(WidgetGVR).Namespace(ns), w)
			if err != nil {
				return err
			}
			s.out.Widgets = append(s.out.Widgets, created)
			n++
		}
	}
	return nil
}

// createRetryingNotFound creates obj, retrying while the resource is not yet
// served (a CRD just became Established).
func createRetryingNotFound(ctx context.Context, r dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var created *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		created, err = r.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("create %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return created, nil
}
