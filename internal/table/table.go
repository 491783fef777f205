// Package table renders cached objects as the API server's Table
// (meta.k8s.io/v1), what it answers to
// Accept: application/json;as=Table;v=v1;g=meta.k8s.io and what kubectl get
// prints. The columns and cells are the API server's own: the printers of
// k8s.io/kubernetes/pkg/printers/internalversion for the built-in kinds
// (see ForResource), a CRD's additionalPrinterColumns for custom resources
// (see ForCRD), and rest.NewDefaultTableConvertor's Name and Created At for
// everything else (see Default). test/table proves it against the real
// printers and CRD convertor.
//
// Everything here works on the JSON bytes the cache holds (cache.Object.Raw):
// nothing does I/O, nothing keeps a reference to the bytes it is given.
package table

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// Convertor turns objects of one resource into table rows.
//
// A Convertor is immutable once built: its methods are safe to call from
// any number of goroutines at once.
type Convertor interface {
	// ColumnDefinitions are the columns of every row, the `-o wide` ones
	// (Priority 1) included, as the API server always sends them. The
	// caller must not modify the slice.
	ColumnDefinitions() []metav1.TableColumnDefinition
	// Row returns the cells (one per column definition) and the row
	// conditions of the object whose JSON is raw, with ages computed at
	// now. The row's Object is left empty: Build fills it. An error means
	// raw is not a JSON object of the expected shape.
	Row(raw []byte, now time.Time) (metav1.TableRow, error)
}

// Options are the query parameters of a Table request (metav1.TableOptions).
type Options struct {
	// IncludeObject is what each row's object holds: metav1.IncludeNone
	// (nothing), metav1.IncludeMetadata (a PartialObjectMetadata, the
	// default when empty) or metav1.IncludeObject (the whole object).
	IncludeObject metav1.IncludeObjectPolicy
	// NoHeaders leaves out the column definitions.
	NoHeaders bool
}

// ErrBadOptions wraps what is wrong with a Table request's parameters; the
// API server answers it with 400 Bad Request.
type ErrBadOptions struct{ msg string }

func (e *ErrBadOptions) Error() string { return e.msg }

// ParseOptions reads includeObject and noHeaders from a request's query as
// the API server does; a value it would refuse is an *ErrBadOptions worded
// as the API server words it.
func ParseOptions(q url.Values) (Options, error) {
	var o Options
	if v, ok := q["includeObject"]; ok && len(v) > 0 {
		o.IncludeObject = metav1.IncludeObjectPolicy(v[0])
	}
	switch o.IncludeObject {
	case "", metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
	default:
		return Options{}, &ErrBadOptions{fmt.Sprintf("unrecognized includeObject value: %q", o.IncludeObject)}
	}
	if v, ok := q["noHeaders"]; ok && len(v) > 0 {
		switch v[0] {
		case "true":
			o.NoHeaders = true
		case "false", "":
		default:
			return Options{}, &ErrBadOptions{fmt.Sprintf("noHeaders: invalid boolean value %q", v[0])}
		}
	}
	return o, nil
}

// Build assembles the Table of the objects whose JSON is in objs, in that
// order, with ages computed at now. Its ListMeta (resourceVersion,
// continue, remainingItemCount) is the caller's to set. An object the
// convertor cannot read fails the whole table, naming its position.
// Build never modifies objs; with IncludeObject the rows share their bytes.
//
// Every row's Object is JSON in Raw (or empty for IncludeNone, which
// encodes as null as the API server's does), so encoding/json writes the
// table exactly as the API server's JSON serializer would.
func Build(c Convertor, objs [][]byte, opts Options, now time.Time) (*metav1.Table, error) {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "Table"},
		Rows:     make([]metav1.TableRow, 0, len(objs)),
	}
	if !opts.NoHeaders {
		t.ColumnDefinitions = c.ColumnDefinitions()
	}
	for i, raw := range objs {
		row, err := c.Row(raw, now)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		switch opts.IncludeObject {
		case metav1.IncludeObject:
			row.Object = runtime.RawExtension{Raw: raw}
		case metav1.IncludeMetadata, "":
			p, err := partialMetadata(raw)
			if err != nil {
				return nil, fmt.Errorf("object %d: %w", i, err)
			}
			row.Object = runtime.RawExtension{Raw: p}
		case metav1.IncludeNone:
		default:
			return nil, &ErrBadOptions{fmt.Sprintf("unrecognized includeObject value: %q", opts.IncludeObject)}
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// partialMetadata is the JSON of what meta.AsPartialObjectMetadata makes of
// the object, with the kind the API server gives it in a Table.
// Only the metadata member is decoded: a pod's spec and status are most
// of its bytes.
func partialMetadata(raw []byte) ([]byte, error) {
	var p metav1.PartialObjectMetadata
	if md := jsonscan.Member(raw, "metadata"); md != nil {
		if err := json.Unmarshal(md, &p.ObjectMeta); err != nil {
			return nil, fmt.Errorf("reading metadata: %w", err)
		}
	}
	p.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
	return json.Marshal(p)
}
