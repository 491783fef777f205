// Package sqlpods keeps pods in an in-memory SQLite the way rancher/steve's
// sqlcache keeps objects (modernc.org/sqlite, an objects table beside a
// fields table with one column per field, indexed), so that make bench
// can ask it kubeindex's questions in the same run: a sorted, filtered
// page with its total, and counts grouped by two keys.
//
// The rows are loaded from kubeindex's own Table of the pods (the cells
// internal/table renders, as kubectl prints them), typed as kubeindex's
// questions compare them: Ready as a fraction, Restarts as its count, Age
// as the creation time, "<none>" as no value (NULL).
package sqlpods

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Row is one pod: the pod Table columns a question reads, and the object.
// A nil pointer is a cell the printer wrote as <none> (SQL NULL).
type Row struct {
	Namespace, Name string
	Phase           *string // status.phase, from the object
	Status          string  // STATUS
	Ready           float64 // READY, "2/3" as 2/3; "0/0" as 0, as kubeindex compares it
	Restarts        int64   // RESTARTS, "3 (5m ago)" as 3
	Created         int64   // metadata.creationTimestamp, Unix seconds: AGE
	IP, Node        *string // IP, NODE
	Object          []byte  // the object's JSON, as kubeindex stores it
}

// Key is the row's namespace/name.
func (r Row) Key() string { return r.Namespace + "/" + r.Name }

// tablePage is the part of a Table (meta.k8s.io/v1) read here.
type tablePage struct {
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	ColumnDefinitions []struct {
		Name string `json:"name"`
	} `json:"columnDefinitions"`
	Rows []struct {
		Cells  []any           `json:"cells"`
		Object json.RawMessage `json:"object"`
	} `json:"rows"`
}

// podMeta is what a row takes from the object itself.
type podMeta struct {
	Metadata struct {
		Namespace         string    `json:"namespace"`
		Name              string    `json:"name"`
		CreationTimestamp time.Time `json:"creationTimestamp"`
	} `json:"metadata"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

// ReadTable reads one page of a pods Table asked with includeObject=Object
// (column definitions included) into rows, and returns the page's continue
// token. A missing column, a cell of the wrong shape or a row without its
// object is an error.
func ReadTable(r io.Reader) ([]Row, string, error) {
	var t tablePage
	if err := json.NewDecoder(r).Decode(&t); err != nil {
		return nil, "", fmt.Errorf("reading the Table: %w", err)
	}
	col := map[string]int{}
	for i, c := range t.ColumnDefinitions {
		col[c.Name] = i
	}
	for _, name := range []string{"Name", "Ready", "Status", "Restarts", "IP", "Node"} {
		if _, ok := col[name]; !ok {
			return nil, "", fmt.Errorf("the Table has no %s column", name)
		}
	}
	rows := make([]Row, 0, len(t.Rows))
	for i, tr := range t.Rows {
		row, err := readRow(tr.Cells, tr.Object, col)
		if err != nil {
			return nil, "", fmt.Errorf("row %d: %w", i, err)
		}
		rows = append(rows, row)
	}
	return rows, t.Metadata.Continue, nil
}

func readRow(cells []any, object json.RawMessage, col map[string]int) (Row, error) {
	if len(cells) != len(col) {
		return Row{}, fmt.Errorf("%d cells for %d columns", len(cells), len(col))
	}
	if len(object) == 0 || object[0] != '{' {
		return Row{}, fmt.Errorf("no object (ask with includeObject=Object)")
	}
	var m podMeta
	if err := json.Unmarshal(object, &m); err != nil {
		return Row{}, fmt.Errorf("object: %w", err)
	}
	text := func(name string) (string, error) {
		s, ok := cells[col[name]].(string)
		if !ok {
			return "", fmt.Errorf("%s cell %v is not text", name, cells[col[name]])
		}
		return s, nil
	}
	row := Row{Namespace: m.Metadata.Namespace, Name: m.Metadata.Name, Created: m.Metadata.CreationTimestamp.Unix(),
		Object: object}
	if m.Status.Phase != "" {
		row.Phase = &m.Status.Phase
	}
	name, err := text("Name")
	if err != nil {
		return Row{}, err
	}
	if name != row.Name {
		return Row{}, fmt.Errorf("Name cell %q for the object %q", name, row.Name)
	}
	if row.Status, err = text("Status"); err != nil {
		return Row{}, err
	}
	ready, err := text("Ready")
	if err != nil {
		return Row{}, err
	}
	if row.Ready, err = fraction(ready); err != nil {
		return Row{}, err
	}
	switch v := cells[col["Restarts"]].(type) {
	case float64: // a number column, as some printers type it
		row.Restarts = int64(v)
	case string:
		n, _, _ := strings.Cut(v, " ") // "3 (5m ago)"
		if row.Restarts, err = strconv.ParseInt(n, 10, 64); err != nil {
			return Row{}, fmt.Errorf("Restarts cell %q: %w", v, err)
		}
	default:
		return Row{}, fmt.Errorf("Restarts cell %v is neither text nor a number", v)
	}
	for _, c := range []struct {
		name string
		to   **string
	}{{"IP", &row.IP}, {"Node", &row.Node}} {
		s, err := text(c.name)
		if err != nil {
			return Row{}, err
		}
		if s != "<none>" && s != "" {
			*c.to = &s
		}
	}
	return row, nil
}

// fraction reads a Ready cell, "2/3", as kubeindex compares it: 2/3, and
// 0 when nothing is to be ready ("0/0").
func fraction(s string) (float64, error) {
	num, den, ok := strings.Cut(s, "/")
	a, err1 := strconv.ParseUint(num, 10, 32)
	b, err2 := strconv.ParseUint(den, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("Ready cell %q is not a fraction", s)
	}
	if b == 0 {
		return 0, nil
	}
	return float64(a) / float64(b), nil
}
