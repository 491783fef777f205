package table

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Default is the API server's table for kinds without a printer
// (k8s.io/apiserver/pkg/registry/rest.NewDefaultTableConvertor): the name
// and the creation time in RFC 3339.
func Default() Convertor { return defaultConvertor{} }

type defaultConvertor struct{}

var defaultColumns = []metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Created At", Type: "date", Description: metaDoc["creationTimestamp"]},
}

func (defaultConvertor) ColumnDefinitions() []metav1.TableColumnDefinition { return defaultColumns }

func (defaultConvertor) Row(raw []byte, _ time.Time) (metav1.TableRow, error) {
	var obj struct {
		Metadata struct {
			Name              string      `json:"name"`
			CreationTimestamp metav1.Time `json:"creationTimestamp"`
		} `json:"metadata"`
	}
	if err := decode(raw, &obj); err != nil {
		return metav1.TableRow{}, fmt.Errorf("reading metadata: %w", err)
	}
	m := &obj.Metadata
	return metav1.TableRow{Cells: []any{m.Name, m.CreationTimestamp.UTC().Format(time.RFC3339)}}, nil
}
