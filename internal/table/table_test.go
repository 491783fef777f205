package table

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The cells themselves are proven against the API server's printers in
// test/table; these tests cover what is kubeindex's own: assembling the
// table, the options, and bad input.

const podJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"7","labels":{"a":"b"},"creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"nodeName":"n1","containers":[{"name":"c"}]},"status":{"phase":"Succeeded","podIP":"10.0.0.1","containerStatuses":[{"name":"c","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}}`

var now = time.Date(2026, 1, 1, 0, 5, 30, 0, time.UTC)

func TestBuildIncludeObject(t *testing.T) {
	pods := ForResource(schema.GroupResource{Resource: "pods"})
	for _, tc := range []struct {
		include metav1.IncludeObjectPolicy
		want    string // the row's object, as JSON
	}{
		{"", `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"7","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"a":"b"}}}`},
		{metav1.IncludeMetadata, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"7","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"a":"b"}}}`},
		{metav1.IncludeNone, `null`},
		{metav1.IncludeObject, podJSON},
	} {
		t.Run(string(tc.include), func(t *testing.T) {
			tab, err := Build(pods, [][]byte{[]byte(podJSON)}, Options{IncludeObject: tc.include}, now)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(tab)
			if err != nil {
				t.Fatal(err)
			}
			var back struct {
				Kind, APIVersion  string
				ColumnDefinitions []metav1.TableColumnDefinition
				Rows              []struct {
					Cells      []any
					Conditions []metav1.TableRowCondition
					Object     json.RawMessage
				}
			}
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Kind != "Table" || back.APIVersion != "meta.k8s.io/v1" || len(back.ColumnDefinitions) != 9 || len(back.Rows) != 1 {
				t.Fatalf("table: %s", b)
			}
			row := back.Rows[0]
			if got := string(row.Object); got != tc.want {
				t.Errorf("object:\n got %s\nwant %s", got, tc.want)
			}
			wantCells := []any{"p", "0/1", "Completed", "0", "5m30s", "10.0.0.1", "n1", "<none>", "<none>"}
			if !equalJSON(row.Cells, wantCells) {
				t.Errorf("cells: got %v, want %v", row.Cells, wantCells)
			}
			if len(row.Conditions) != 1 || row.Conditions[0].Reason != "Succeeded" {
				t.Errorf("conditions: %v", row.Conditions)
			}
		})
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestBuildNoHeadersAndEmpty(t *testing.T) {
	tab, err := Build(Default(), nil, Options{NoHeaders: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(tab)
	if !strings.Contains(string(b), `"rows":[]`) || strings.Contains(string(b), `"columnDefinitions":[{`) {
		t.Errorf("empty table without headers: %s", b)
	}
}

func TestBuildBadObject(t *testing.T) {
	for name, c := range map[string]Convertor{
		"pods":    ForResource(schema.GroupResource{Resource: "pods"}),
		"default": Default(),
	} {
		_, err := Build(c, [][]byte{[]byte(podJSON), []byte(`{"metadata":`)}, Options{}, now)
		if err == nil || !strings.Contains(err.Error(), "object 1") {
			t.Errorf("%s: got %v, want an error naming object 1", name, err)
		}
		_, err = Build(c, [][]byte{[]byte(`[1]`)}, Options{}, now)
		if err == nil {
			t.Errorf("%s: an array is not an object", name)
		}
	}
}

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  Options
		err   string
	}{
		{"", Options{}, ""},
		{"includeObject=Object&noHeaders=true", Options{IncludeObject: metav1.IncludeObject, NoHeaders: true}, ""},
		{"includeObject=None", Options{IncludeObject: metav1.IncludeNone}, ""},
		{"includeObject=Metadata&noHeaders=false", Options{IncludeObject: metav1.IncludeMetadata}, ""},
		{"includeObject=all", Options{}, `unrecognized includeObject value: "all"`},
		{"noHeaders=yes", Options{}, `noHeaders`},
	} {
		q, _ := url.ParseQuery(tc.query)
		got, err := ParseOptions(q)
		var bad *ErrBadOptions
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.query, err)
		case tc.err != "" && (!errors.As(err, &bad) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: got %v, want an *ErrBadOptions with %q", tc.query, err, tc.err)
		case got != tc.want:
			t.Errorf("%q: got %+v, want %+v", tc.query, got, tc.want)
		}
	}
}

func TestForCRD(t *testing.T) {
	crd := `{"metadata":{"name":"widgets.example.com"},"spec":{"versions":[
		{"name":"v1","additionalPrinterColumns":[{"name":"Size","type":"integer","jsonPath":".spec.size"},{"name":"Bad","type":"string","jsonPath":".spec[?(@"}]},
		{"name":"v2"}]}}`
	c, err := ForCRD([]byte(crd), "v2")
	if err != nil {
		t.Fatal(err)
	}
	if cols := c.ColumnDefinitions(); len(cols) != 2 || cols[1].Name != "Age" || cols[1].Type != "date" {
		t.Errorf("v2 columns: %+v", cols)
	}
	c, err = ForCRD([]byte(crd), "v1")
	if err == nil || c == nil || len(c.ColumnDefinitions()) != 2 {
		t.Fatalf("an unparsable column: want an error and the columns before it, got %v, %v", c, err)
	}
	row, err := c.Row([]byte(`{"metadata":{"name":"w"},"spec":{"size":3}}`), now)
	if err != nil || !equalJSON(row.Cells, []any{"w", 3}) {
		t.Errorf("row: %v, %v", row.Cells, err)
	}
	var nv *ErrNoVersion
	if _, err := ForCRD([]byte(crd), "v9"); !errors.As(err, &nv) {
		t.Errorf("unknown version: %v", err)
	}
	if _, err := ForCRD([]byte(`{`), "v1"); err == nil {
		t.Error("bad JSON: no error")
	}
	if _, err := c.Row([]byte(`null`), now); err == nil {
		t.Error("null custom resource: no error")
	}
}

func TestForResource(t *testing.T) {
	if !HasPrinter(schema.GroupResource{Group: "apps", Resource: "deployments"}) {
		t.Error("deployments have a printer")
	}
	gr := schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "roles"}
	if HasPrinter(gr) {
		t.Error("roles have no printer here")
	}
	row, err := ForResource(gr).Row([]byte(`{"metadata":{"name":"r","creationTimestamp":"2026-01-01T01:00:00+01:00"}}`), now)
	if err != nil || !equalJSON(row.Cells, []any{"r", "2026-01-01T00:00:00Z"}) {
		t.Errorf("default row: %v, %v", row.Cells, err)
	}
}

// TestConcurrentRows runs convertors from many goroutines; -race proves
// the shared state (the CRD convertor's JSONPath pool) sound. Only the
// first value of a list is a cell, as in the API server.
func TestConcurrentRows(t *testing.T) {
	crd, err := ForCRD([]byte(`{"spec":{"versions":[{"name":"v1","additionalPrinterColumns":[{"name":"N","type":"string","jsonPath":".spec.items[*].n"}]}]}}`), "v1")
	if err != nil {
		t.Fatal(err)
	}
	obj := []byte(`{"metadata":{"name":"w"},"spec":{"items":[{"n":"a"},{"n":"b"}]}}`)
	done := make(chan error)
	for range 8 {
		go func() {
			var err error
			for range 200 {
				var row metav1.TableRow
				if row, err = crd.Row(obj, now); err == nil && !equalJSON(row.Cells, []any{"w", "a"}) {
					err = errors.New("wrong cells")
				}
				if err == nil {
					_, err = ForResource(schema.GroupResource{Resource: "pods"}).Row([]byte(podJSON), now)
				}
				if err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
