package table

import (
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scalePrinter is the table of the scale subresource (kubectl get
// --subresource=scale), as the API server prints an autoscaling Scale.
func scalePrinter() Convertor {
	return printer[autoscalingv1.Scale]{columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Description: metaDoc["name"]},
		{Name: "Desired", Type: "integer", Description: autoscalingv1.ScaleSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Available", Type: "integer", Description: autoscalingv1.ScaleStatus{}.SwaggerDoc()["replicas"]},
		ageColumn,
	}, cells: func(s *autoscalingv1.Scale, now time.Time) ([]any, []metav1.TableRowCondition) {
		return []any{s.Name, int64(s.Spec.Replicas), int64(s.Status.Replicas), since(s.CreationTimestamp, now)}, nil
	}}
}
