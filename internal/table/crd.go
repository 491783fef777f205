package table

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/util/jsonpath"
)

// printerColumn is a CRD version's additionalPrinterColumns entry
// (apiextensions.k8s.io/v1 CustomResourceColumnDefinition).
type printerColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format,omitempty"`
	Description string `json:"description,omitempty"`
	Priority    int32  `json:"priority,omitempty"`
	JSONPath    string `json:"jsonPath"`
}

type crdObject struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Versions []struct {
			Name                     string          `json:"name"`
			AdditionalPrinterColumns []printerColumn `json:"additionalPrinterColumns"`
		} `json:"versions"`
	} `json:"spec"`
}

// ErrNoVersion is ForCRD's answer for a version the CRD does not define.
type ErrNoVersion struct{ CRD, Version string }

func (e *ErrNoVersion) Error() string {
	return fmt.Sprintf("version %s not found in CustomResourceDefinition %s", e.Version, e.CRD)
}

// ForCRD is the table of the custom resources of one version of a CRD,
// whose JSON (apiextensions.k8s.io/v1) is crd: the version's
// additionalPrinterColumns, or Age when it has none, after an implicit
// Name, evaluated as the apiextensions-apiserver's tableconvertor does.
//
// A column whose JSONPath does not parse is an error returned together
// with a usable Convertor holding the columns before it: the API server
// serves exactly that (it logs the error and keeps the partial convertor).
// Bad JSON or an unknown version return a nil Convertor and an error.
func ForCRD(crd []byte, version string) (Convertor, error) {
	var obj crdObject
	if err := json.Unmarshal(crd, &obj); err != nil {
		return nil, fmt.Errorf("decoding CustomResourceDefinition: %w", err)
	}
	for _, v := range obj.Spec.Versions {
		if v.Name != version {
			continue
		}
		cols := v.AdditionalPrinterColumns
		if len(cols) == 0 {
			cols = ageColumns()
		}
		return newCRDConvertor(cols)
	}
	return nil, &ErrNoVersion{CRD: obj.Metadata.Name, Version: version}
}

// ageColumns are a CRD version's columns when it declares none.
func ageColumns() []printerColumn {
	return []printerColumn{{Name: "Age", Type: "date", Description: metaDoc["creationTimestamp"], JSONPath: ".metadata.creationTimestamp"}}
}

// ForUnreadCRD is the table of a custom resource whose CRD is not known
// (kubeindex may not read it): Name and Age, what the API server prints
// for a CRD version without printer columns, rather than the generic
// table's Created At.
func ForUnreadCRD() Convertor {
	c, _ := newCRDConvertor(ageColumns())
	return c
}

func newCRDConvertor(cols []printerColumn) (Convertor, error) {
	c := &crdConvertor{columns: []metav1.TableColumnDefinition{nameColumn}}
	for _, col := range cols {
		if _, err := parseColumn(col); err != nil {
			c.pool.New = c.newPaths
			return c, fmt.Errorf("unrecognized column definition %q", col.JSONPath)
		}
		desc := "Custom resource definition column (in JSONPath format): " + col.JSONPath
		if col.Description != "" {
			desc = col.Description
		}
		c.paths = append(c.paths, col)
		c.columns = append(c.columns, metav1.TableColumnDefinition{
			Name: col.Name, Type: col.Type, Format: col.Format, Description: desc, Priority: col.Priority,
		})
	}
	c.pool.New = c.newPaths
	return c, nil
}

func parseColumn(col printerColumn) (*jsonpath.JSONPath, error) {
	p := jsonpath.New(col.Name)
	if err := p.Parse("{" + col.JSONPath + "}"); err != nil {
		return nil, err
	}
	p.AllowMissingKeys(true)
	return p, nil
}

// crdConvertor holds the parsed JSONPaths in a pool: a jsonpath.JSONPath
// keeps state while it evaluates, so each Row takes a set of its own.
type crdConvertor struct {
	columns []metav1.TableColumnDefinition
	paths   []printerColumn
	pool    sync.Pool // of *[]*jsonpath.JSONPath, one per entry of paths
}

func (c *crdConvertor) newPaths() any {
	ps := make([]*jsonpath.JSONPath, len(c.paths))
	for i, col := range c.paths {
		ps[i], _ = parseColumn(col) // parsed once already in newCRDConvertor
	}
	return &ps
}

func (c *crdConvertor) ColumnDefinitions() []metav1.TableColumnDefinition { return c.columns }

func (c *crdConvertor) Row(raw []byte, now time.Time) (metav1.TableRow, error) {
	// Numbers as the API server's unstructured objects hold them: int64
	// when integral, float64 otherwise.
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return metav1.TableRow{}, fmt.Errorf("decoding custom resource: %w", err)
	}
	if obj == nil {
		return metav1.TableRow{}, fmt.Errorf("decoding custom resource: not an object")
	}
	name := ""
	if m, ok := obj["metadata"].(map[string]any); ok {
		name, _ = m["name"].(string)
	}
	ps := c.pool.Get().(*[]*jsonpath.JSONPath)
	defer c.pool.Put(ps)
	cells := make([]any, 1, 1+len(c.paths))
	cells[0] = name
	var buf bytes.Buffer
	for i, p := range *ps {
		results, err := p.FindResults(obj)
		if err != nil || len(results) == 0 || len(results[0]) == 0 {
			cells = append(cells, nil)
			continue
		}
		value := results[0][0].Interface()
		typ := c.columns[i+1].Type
		if typ != "string" {
			cells = append(cells, cellForJSONValue(typ, value, now))
			continue
		}
		buf.Reset()
		if err := p.PrintResults(&buf, []reflect.Value{reflect.ValueOf(value)}); err != nil {
			cells = append(cells, nil)
			continue
		}
		cells = append(cells, buf.String())
	}
	return metav1.TableRow{Cells: cells}, nil
}

// cellForJSONValue is the tableconvertor's, with ages at now.
func cellForJSONValue(typ string, value any, now time.Time) any {
	if value == nil {
		return nil
	}
	switch typ {
	case "integer":
		switch v := value.(type) {
		case int64:
			return v
		case float64:
			return int64(v)
		case json.Number:
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
	case "number":
		switch v := value.(type) {
		case int64:
			return float64(v)
		case float64:
			return v
		case json.Number:
			if f, err := v.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if b, ok := value.(bool); ok {
			return b
		}
	case "string":
		if s, ok := value.(string); ok {
			return s
		}
	case "date":
		if s, ok := value.(string); ok {
			var t metav1.Time
			if err := t.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			return since(t, now)
		}
	}
	return nil
}
