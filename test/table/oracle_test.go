// Package table proves internal/table against the API server's own code:
// the printers of k8s.io/kubernetes (as the API server's TableConvertor
// calls them, wide) for the built-in kinds, the apiextensions-apiserver's
// tableconvertor for custom resources, and rest.NewDefaultTableConvertor
// for the rest. Each object goes in as JSON, as the cache holds it; the
// oracle decodes it as the API server would (v1, converted to the internal
// version; unstructured for custom resources) and both must give the same
// column definitions, cells and row conditions.
package table

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install"
	_ "k8s.io/kubernetes/pkg/apis/events/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
	printerstorage "k8s.io/kubernetes/pkg/printers/storage"

	"github.com/kubeindex/kubeindex/internal/table"
)

// apiServerPrinters is the TableConvertor the API server's registries use
// for the built-in kinds.
var apiServerPrinters = printerstorage.TableConvertor{TableGenerator: printers.NewTableGenerator().With(printersinternal.AddHandlers)}

// printed runs the API server's printer on the object whose JSON is raw,
// of the given v1 kind.
func printed(t testing.TB, gvk schema.GroupVersionKind, raw []byte) *metav1.Table {
	t.Helper()
	versioned, err := legacyscheme.Scheme.New(gvk)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, versioned); err != nil {
		t.Fatalf("decoding %s: %v", gvk.Kind, err)
	}
	internal, err := legacyscheme.Scheme.New(gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		t.Fatal(err)
	}
	if err := legacyscheme.Scheme.Convert(versioned, internal, nil); err != nil {
		t.Fatalf("converting %s: %v", gvk.Kind, err)
	}
	tab, err := apiServerPrinters.ConvertToTable(context.Background(), internal, nil)
	if err != nil {
		t.Fatalf("printing %s: %v", gvk.Kind, err)
	}
	return tab
}

// sameSecond runs both sides until they ran within one wall-clock second:
// every age boundary of HumanDuration falls on a whole second of a
// timestamp that has whole seconds, so within one second both must agree,
// and the printers read the clock themselves.
func sameSecond(t testing.TB, f func(now time.Time)) {
	t.Helper()
	for range 5 {
		now := time.Now()
		f(now)
		if time.Now().Unix() == now.Unix() {
			return
		}
	}
	t.Fatal("could not run both sides within one second in 5 tries")
}

// agree requires the same row from internal/table and the oracle.
func agree(t *testing.T, c table.Convertor, want func() *metav1.Table, raw []byte) {
	t.Helper()
	var got metav1.TableRow
	var w *metav1.Table
	sameSecond(t, func(now time.Time) {
		var err error
		got, err = c.Row(raw, now)
		if err != nil {
			t.Fatalf("Row: %v\n%s", err, raw)
		}
		w = want()
	})
	if !reflect.DeepEqual(c.ColumnDefinitions(), w.ColumnDefinitions) {
		t.Fatalf("column definitions differ:\n got %#v\nwant %#v", c.ColumnDefinitions(), w.ColumnDefinitions)
	}
	if len(w.Rows) != 1 {
		t.Fatalf("oracle gave %d rows", len(w.Rows))
	}
	if !reflect.DeepEqual(got.Cells, w.Rows[0].Cells) {
		t.Errorf("cells differ:\n got %#v\nwant %#v\nobject %s", got.Cells, w.Rows[0].Cells, raw)
	}
	if !reflect.DeepEqual(got.Conditions, w.Rows[0].Conditions) {
		t.Errorf("row conditions differ:\n got %#v\nwant %#v\nobject %s", got.Conditions, w.Rows[0].Conditions, raw)
	}
}

func agreeBuiltin(t *testing.T, gr schema.GroupResource, gvk schema.GroupVersionKind, raw []byte) {
	t.Helper()
	if !table.HasPrinter(gr) {
		t.Fatalf("no printer for %v", gr)
	}
	agree(t, table.ForResource(gr), func() *metav1.Table { return printed(t, gvk, raw) }, raw)
}
