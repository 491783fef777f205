package table

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// printer is a Convertor for a built-in kind: the printer's columns and a
// function that reads the object into T and returns its cells.
type printer[T any] struct {
	columns []metav1.TableColumnDefinition
	cells   func(obj *T, now time.Time) ([]any, []metav1.TableRowCondition)
	// scan, when set, fills a zero T from the JSON as decode does, or
	// reports false and leaves the JSON to decode (pods_scan.go).
	scan func(raw []byte, obj *T) bool
}

var (
	_ Convertor = printer[struct{}]{}
	_ Scanner   = printer[struct{}]{}
)

// Scanner is a Convertor that reads the objects it can by a scan of
// their JSON (pods_scan.go) rather than its decoder.
type Scanner interface {
	// ScanRow is Row for an object the scan reads itself; ok is false
	// when it does not (Row decodes those).
	ScanRow(raw []byte, now time.Time) (row metav1.TableRow, ok bool)
}

func (p printer[T]) ColumnDefinitions() []metav1.TableColumnDefinition { return p.columns }

func (p printer[T]) Row(raw []byte, now time.Time) (metav1.TableRow, error) {
	if row, ok := p.ScanRow(raw, now); ok {
		return row, nil
	}
	return p.row(raw, now, decode[T])
}

func (p printer[T]) ScanRow(raw []byte, now time.Time) (metav1.TableRow, bool) {
	if p.scan == nil {
		return metav1.TableRow{}, false
	}
	var obj T
	if !p.scan(raw, &obj) {
		return metav1.TableRow{}, false
	}
	cells, conds := p.cells(&obj, now)
	return metav1.TableRow{Cells: cells, Conditions: conds}, true
}

// row is Row with the object decoded by dec.
func (p printer[T]) row(raw []byte, now time.Time, dec func([]byte, *T) error) (metav1.TableRow, error) {
	var obj T
	if err := dec(raw, &obj); err != nil {
		return metav1.TableRow{}, fmt.Errorf("decoding %T: %w", obj, err)
	}
	cells, conds := p.cells(&obj, now)
	return metav1.TableRow{Cells: cells, Conditions: conds}, nil
}

var (
	metaDoc = metav1.ObjectMeta{}.SwaggerDoc()

	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metaDoc["name"]}
	ageColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metaDoc["creationTimestamp"]}

	containersColumn = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."}
	imagesColumn     = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."}
)

// since is the printers' translateTimestampSince at now.
func since(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// sinceMicro is the printers' translateMicroTimestampSince at now.
func sinceMicro(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
