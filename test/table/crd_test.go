package table

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeindex/kubeindex/internal/table"
)

// crdColumns is what the apiextensions-apiserver hands tableconvertor.New
// for a version (its unexported getColumnsForVersion and
// serveDefaultColumnsIfEmpty).
func crdColumns(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition, version string) []apiextensionsv1.CustomResourceColumnDefinition {
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			if len(v.AdditionalPrinterColumns) > 0 {
				return v.AdditionalPrinterColumns
			}
			return []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"], JSONPath: ".metadata.creationTimestamp"}}
		}
	}
	t.Fatalf("no version %s", version)
	return nil
}

func widgetCRD(cols []apiextensionsv1.CustomResourceColumnDefinition) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1", AdditionalPrinterColumns: cols},
			{Name: "v2"},
		}},
	}
}

var widgetColumns = []apiextensionsv1.CustomResourceColumnDefinition{
	{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
	{Name: "Ratio", Type: "number", JSONPath: ".spec.ratio", Description: "how much"},
	{Name: "Enabled", Type: "boolean", JSONPath: ".spec.enabled", Priority: 1},
	{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
	{Name: "Anything", Type: "string", JSONPath: ".spec.anything"},
	{Name: "First", Type: "string", JSONPath: ".spec.items[0].name"},
	{Name: "Names", Type: "string", JSONPath: ".spec.items[*].name"},
	{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
	{Name: "Since", Type: "date", JSONPath: ".status.since", Format: "date-time"},
	{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	{Name: "Mismatch", Type: "integer", JSONPath: ".status.phase"},
}

func randomValue(r *rand.Rand) any {
	switch r.IntN(9) {
	case 0:
		return nil
	case 1:
		return r.IntN(1000) - 10
	case 2:
		return r.Float64() * 100
	case 3:
		return r.IntN(2) == 0
	case 4:
		return pick(r, "Running", "", "x y", "2024-01-02T03:04:05Z", "not a date")
	case 5:
		return ago(randomAge(r)).UTC().Format("2006-01-02T15:04:05Z")
	case 6:
		return map[string]any{"a": 1, "b": []any{"c"}}
	case 7:
		return []any{1, "two", 3.5}
	default:
		return 1e21
	}
}

func randomWidget(r *rand.Rand, i int) []byte {
	spec := map[string]any{}
	status := map[string]any{}
	for _, k := range []string{"replicas", "ratio", "enabled", "anything"} {
		if r.IntN(4) > 0 {
			spec[k] = randomValue(r)
		}
	}
	if r.IntN(2) == 0 {
		var items []any
		for j := range r.IntN(3) {
			items = append(items, map[string]any{"name": fmt.Sprintf("item-%d", j)})
		}
		spec["items"] = items
	}
	for _, k := range []string{"phase", "since"} {
		if r.IntN(4) > 0 {
			status[k] = randomValue(r)
		}
	}
	if r.IntN(2) == 0 {
		status["conditions"] = []any{map[string]any{"type": "Synced", "status": "True"}, map[string]any{"type": "Ready", "status": pick(r, "True", "False")}}
	}
	meta := map[string]any{"name": fmt.Sprintf("w-%d", i), "namespace": "ns"}
	if r.IntN(8) > 0 {
		meta["creationTimestamp"] = ago(randomAge(r)).UTC().Format("2006-01-02T15:04:05Z")
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": meta, "spec": spec, "status": status})
	return b
}

func agreeCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string, objs [][]byte) {
	t.Helper()
	want, wantErr := tableconvertor.New(crdColumns(t, crd, version))
	got, gotErr := table.ForCRD(mustJSON(t, crd), version)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("error: got %v, want %v", gotErr, wantErr)
	}
	for _, raw := range objs {
		agree(t, got, func() *metav1.Table {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				t.Fatal(err)
			}
			tab, err := want.ConvertToTable(context.Background(), u, nil)
			if err != nil {
				t.Fatal(err)
			}
			return tab
		}, raw)
		if t.Failed() {
			return
		}
	}
}

func TestCRDColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 3))
	var objs [][]byte
	for i := range 1000 {
		objs = append(objs, randomWidget(r, i))
	}
	t.Run("printer columns", func(t *testing.T) { agreeCRD(t, widgetCRD(widgetColumns), "v1", objs) })
	t.Run("no columns: Age", func(t *testing.T) { agreeCRD(t, widgetCRD(widgetColumns), "v2", objs) })
	bad := append(append([]apiextensionsv1.CustomResourceColumnDefinition{}, widgetColumns[:2]...),
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Bad", Type: "string", JSONPath: ".spec[?(@"}, widgetColumns[3])
	t.Run("unparsable column: the columns before it", func(t *testing.T) { agreeCRD(t, widgetCRD(bad), "v1", objs) })
}

func TestDefaultTable(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 4))
	want := rest.NewDefaultTableConvertor(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"})
	for i := range 200 {
		raw := randomWidget(r, i)
		agree(t, table.Default(), func() *metav1.Table {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				t.Fatal(err)
			}
			tab, err := want.ConvertToTable(context.Background(), u, nil)
			if err != nil {
				t.Fatal(err)
			}
			return tab
		}, raw)
	}
}
