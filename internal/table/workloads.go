package table

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
)

// containerCells is the printers' layoutContainerCells.
func containerCells(cs []corev1.Container) (names, images string) {
	var n, i strings.Builder
	for k, c := range cs {
		if k > 0 {
			n.WriteByte(',')
			i.WriteByte(',')
		}
		n.WriteString(c.Name)
		i.WriteString(c.Image)
	}
	return n.String(), i.String()
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func deploymentPrinter() Convertor {
	return printer[appsv1.Deployment]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		{Name: "Up-to-date", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
		{Name: "Available", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]},
	}, cells: func(d *appsv1.Deployment, now time.Time) ([]any, []metav1.TableRowCondition) {
		selector := "<invalid>"
		if s, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
			selector = s.String()
		}
		names, images := containerCells(d.Spec.Template.Spec.Containers)
		return []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, deref32(d.Spec.Replicas)),
			int64(d.Status.UpdatedReplicas), int64(d.Status.AvailableReplicas), since(d.CreationTimestamp, now),
			names, images, selector}, nil
	}}
}

func replicaSetPrinter() Convertor {
	return printer[appsv1.ReplicaSet]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Desired", Type: "integer", Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Current", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
		{Name: "Ready", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]},
	}, cells: func(r *appsv1.ReplicaSet, now time.Time) ([]any, []metav1.TableRowCondition) {
		names, images := containerCells(r.Spec.Template.Spec.Containers)
		return []any{r.Name, int64(deref32(r.Spec.Replicas)), int64(r.Status.Replicas), int64(r.Status.ReadyReplicas),
			since(r.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(r.Spec.Selector)}, nil
	}}
}

func statefulSetPrinter() Convertor {
	return printer[appsv1.StatefulSet]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		ageColumn,
		containersColumn,
		imagesColumn,
	}, cells: func(s *appsv1.StatefulSet, now time.Time) ([]any, []metav1.TableRowCondition) {
		names, images := containerCells(s.Spec.Template.Spec.Containers)
		return []any{s.Name, fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, deref32(s.Spec.Replicas)),
			since(s.CreationTimestamp, now), names, images}, nil
	}}
}

func daemonSetPrinter() Convertor {
	return printer[appsv1.DaemonSet]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Desired", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"]},
		{Name: "Current", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"]},
		{Name: "Ready", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]},
		{Name: "Up-to-date", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["updatedNumberScheduled"]},
		{Name: "Available", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"]},
		{Name: "Node Selector", Type: "string", Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]},
	}, cells: func(d *appsv1.DaemonSet, now time.Time) ([]any, []metav1.TableRowCondition) {
		st := &d.Status
		names, images := containerCells(d.Spec.Template.Spec.Containers)
		return []any{d.Name, int64(st.DesiredNumberScheduled), int64(st.CurrentNumberScheduled), int64(st.NumberReady),
			int64(st.UpdatedNumberScheduled), int64(st.NumberAvailable), labels.FormatLabels(d.Spec.Template.Spec.NodeSelector),
			since(d.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(d.Spec.Selector)}, nil
	}}
}

func hasJobCondition(conds []batchv1.JobCondition, t batchv1.JobConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func jobPrinter() Convertor {
	return printer[batchv1.Job]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "Status of the job."},
		{Name: "Completions", Type: "string", Description: batchv1.JobStatus{}.SwaggerDoc()["succeeded"]},
		{Name: "Duration", Type: "string", Description: "Time required to complete the job."},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
	}, cells: func(j *batchv1.Job, now time.Time) ([]any, []metav1.TableRowCondition) {
		var completions string
		switch p := deref32(j.Spec.Parallelism); {
		case j.Spec.Completions != nil:
			completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
		case p > 1:
			completions = fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, p)
		default:
			completions = fmt.Sprintf("%d/1", j.Status.Succeeded)
		}
		var took string
		switch {
		case j.Status.StartTime == nil:
		case j.Status.CompletionTime == nil:
			took = duration.HumanDuration(now.Sub(j.Status.StartTime.Time))
		default:
			took = duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
		}
		var status string
		switch c := j.Status.Conditions; {
		case hasJobCondition(c, batchv1.JobComplete):
			status = "Complete"
		case hasJobCondition(c, batchv1.JobFailed):
			status = "Failed"
		case j.DeletionTimestamp != nil:
			status = "Terminating"
		case hasJobCondition(c, batchv1.JobSuspended):
			status = "Suspended"
		case hasJobCondition(c, batchv1.JobFailureTarget):
			status = "FailureTarget"
		case hasJobCondition(c, batchv1.JobSuccessCriteriaMet):
			status = "SuccessCriteriaMet"
		default:
			status = "Running"
		}
		names, images := containerCells(j.Spec.Template.Spec.Containers)
		return []any{j.Name, status, completions, took, since(j.CreationTimestamp, now),
			names, images, metav1.FormatLabelSelector(j.Spec.Selector)}, nil
	}}
}

func cronJobPrinter() Convertor {
	return printer[batchv1.CronJob]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Schedule", Type: "string", Description: batchv1.CronJobSpec{}.SwaggerDoc()["schedule"]},
		{Name: "Timezone", Type: "string", Description: batchv1.CronJobSpec{}.SwaggerDoc()["timeZone"]},
		{Name: "Suspend", Type: "boolean", Description: batchv1.CronJobSpec{}.SwaggerDoc()["suspend"]},
		{Name: "Active", Type: "integer", Description: batchv1.CronJobStatus{}.SwaggerDoc()["active"]},
		{Name: "Last Schedule", Type: "string", Description: batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]},
		ageColumn,
		containersColumn,
		imagesColumn,
		{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
	}, cells: func(c *batchv1.CronJob, now time.Time) ([]any, []metav1.TableRowCondition) {
		last := "<none>"
		if c.Status.LastScheduleTime != nil {
			last = since(*c.Status.LastScheduleTime, now)
		}
		tz := "<none>"
		if c.Spec.TimeZone != nil {
			tz = *c.Spec.TimeZone
		}
		suspend := "<unset>"
		if c.Spec.Suspend != nil {
			suspend = "False"
			if *c.Spec.Suspend {
				suspend = "True"
			}
		}
		names, images := containerCells(c.Spec.JobTemplate.Spec.Template.Spec.Containers)
		return []any{c.Name, c.Spec.Schedule, tz, suspend, int64(len(c.Status.Active)), last, since(c.CreationTimestamp, now),
			names, images, metav1.FormatLabelSelector(c.Spec.JobTemplate.Spec.Selector)}, nil
	}}
}
