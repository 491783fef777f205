package table

import (
	"math/rand/v2"
	"testing"

	randv1 "math/rand"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	apitesting "k8s.io/kubernetes/pkg/api/testing"
)

// builtins are the kinds internal/table prints besides pods.
var builtins = []struct {
	gr  schema.GroupResource
	gvk schema.GroupVersionKind
}{
	{schema.GroupResource{Resource: "pods"}, corev1.SchemeGroupVersion.WithKind("Pod")},
	{schema.GroupResource{Resource: "services"}, corev1.SchemeGroupVersion.WithKind("Service")},
	{schema.GroupResource{Resource: "nodes"}, corev1.SchemeGroupVersion.WithKind("Node")},
	{schema.GroupResource{Resource: "namespaces"}, corev1.SchemeGroupVersion.WithKind("Namespace")},
	{schema.GroupResource{Resource: "configmaps"}, corev1.SchemeGroupVersion.WithKind("ConfigMap")},
	{schema.GroupResource{Resource: "secrets"}, corev1.SchemeGroupVersion.WithKind("Secret")},
	{schema.GroupResource{Resource: "serviceaccounts"}, corev1.SchemeGroupVersion.WithKind("ServiceAccount")},
	{schema.GroupResource{Resource: "persistentvolumeclaims"}, corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")},
	{schema.GroupResource{Resource: "events"}, corev1.SchemeGroupVersion.WithKind("Event")},
	{schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, eventsv1.SchemeGroupVersion.WithKind("Event")},
	{schema.GroupResource{Group: "apps", Resource: "deployments"}, appsv1.SchemeGroupVersion.WithKind("Deployment")},
	{schema.GroupResource{Group: "apps", Resource: "replicasets"}, appsv1.SchemeGroupVersion.WithKind("ReplicaSet")},
	{schema.GroupResource{Group: "apps", Resource: "statefulsets"}, appsv1.SchemeGroupVersion.WithKind("StatefulSet")},
	{schema.GroupResource{Group: "apps", Resource: "daemonsets"}, appsv1.SchemeGroupVersion.WithKind("DaemonSet")},
	{schema.GroupResource{Group: "batch", Resource: "jobs"}, batchv1.SchemeGroupVersion.WithKind("Job")},
	{schema.GroupResource{Group: "batch", Resource: "cronjobs"}, batchv1.SchemeGroupVersion.WithKind("CronJob")},
	{schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")},
	{schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, networkingv1.SchemeGroupVersion.WithKind("Ingress")},
}

// TestKindsFuzzed fills internal objects of every printed kind with the
// Kubernetes round-trip fuzzer (the values the API's own tests use),
// converts them to v1 JSON as the API server would serve them, and
// requires the same row from both sides. Times the printers read are moved
// to ages within reach of every unit (the fuzzer's span 1000 years).
func TestKindsFuzzed(t *testing.T) {
	f := fuzzer.FuzzerFor(apitesting.FuzzerFuncs, randv1.NewSource(14), legacyscheme.Codecs)
	r := rand.New(rand.NewPCG(14, 2))
	for _, k := range builtins {
		t.Run(k.gr.String(), func(t *testing.T) {
			for range 300 {
				internal, err := legacyscheme.Scheme.New(k.gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
				if err != nil {
					t.Fatal(err)
				}
				f.Fill(internal)
				versioned, err := legacyscheme.Scheme.New(k.gvk)
				if err != nil {
					t.Fatal(err)
				}
				if err := legacyscheme.Scheme.Convert(internal, versioned, nil); err != nil {
					t.Fatal(err)
				}
				retime(r, versioned)
				steer(r, versioned)
				agreeBuiltin(t, k.gr, k.gvk, mustJSON(t, versioned))
				if t.Failed() {
					return
				}
			}
		})
	}
}

// retime puts the timestamps the printers turn into ages at ages that
// exercise HumanDuration, in whole seconds.
func retime(r *rand.Rand, obj runtime.Object) {
	m := obj.(metav1.Object)
	m.SetCreationTimestamp(ago(randomAge(r)))
	if m.GetDeletionTimestamp() != nil {
		m.SetDeletionTimestamp(agoPtr(randomAge(r)))
	}
	micro := func() metav1.MicroTime { return metav1.NewMicroTime(ago(randomAge(r)).Time) }
	switch o := obj.(type) {
	case *corev1.Pod:
		for _, ss := range [][]corev1.ContainerStatus{o.Status.InitContainerStatuses, o.Status.ContainerStatuses} {
			for i := range ss {
				if t := ss[i].LastTerminationState.Terminated; t != nil {
					t.FinishedAt = ago(randomAge(r))
				}
			}
		}
	case *corev1.Event:
		if !o.FirstTimestamp.IsZero() {
			o.FirstTimestamp = ago(randomAge(r))
		}
		if !o.LastTimestamp.IsZero() {
			o.LastTimestamp = ago(randomAge(r))
		}
		if !o.EventTime.IsZero() {
			o.EventTime = micro()
		}
		if o.Series != nil {
			o.Series.LastObservedTime = micro()
		}
	case *eventsv1.Event:
		if !o.DeprecatedFirstTimestamp.IsZero() {
			o.DeprecatedFirstTimestamp = ago(randomAge(r))
		}
		if !o.DeprecatedLastTimestamp.IsZero() {
			o.DeprecatedLastTimestamp = ago(randomAge(r))
		}
		if !o.EventTime.IsZero() {
			o.EventTime = micro()
		}
		if o.Series != nil {
			o.Series.LastObservedTime = micro()
		}
	case *batchv1.Job:
		if o.Status.StartTime != nil {
			o.Status.StartTime = agoPtr(randomAge(r))
		}
	case *batchv1.CronJob:
		if o.Status.LastScheduleTime != nil {
			o.Status.LastScheduleTime = agoPtr(randomAge(r))
		}
	}
}

// steer puts, over the fuzzer's arbitrary strings, the values the
// printers branch on, so that each branch is taken often.
func steer(r *rand.Rand, obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Node:
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		for _, k := range []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/", "node-role.kubernetes.io/worker", "kubernetes.io/role"} {
			if r.IntN(2) == 0 {
				o.Labels[k] = pick(r, "", "", "master", "worker")
			}
		}
		for i := range o.Status.Conditions {
			if r.IntN(2) == 0 {
				o.Status.Conditions[i].Type = corev1.NodeReady
				o.Status.Conditions[i].Status = pick(r, corev1.ConditionTrue, corev1.ConditionFalse)
			}
		}
		for i := range o.Status.Addresses {
			o.Status.Addresses[i].Type = pick(r, corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName)
		}
	case *corev1.Service:
		o.Spec.Type = pick(r, corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName, "Other")
		for i := range o.Status.LoadBalancer.Ingress {
			in := &o.Status.LoadBalancer.Ingress[i]
			in.IP = pick(r, "", "1.2.3.4", "5.6.7.8", "1.2.3.4")
			in.Hostname = pick(r, "", "lb.example.com", "a-very-long-load-balancer-name.example.com")
		}
	case *corev1.PersistentVolumeClaim:
		if r.IntN(3) == 0 {
			o.Spec.VolumeName = ""
		}
		if r.IntN(3) == 0 {
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			o.Annotations["volume.beta.kubernetes.io/storage-class"] = pick(r, "", "fast")
		}
		modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod}
		o.Status.AccessModes = nil
		for range r.IntN(5) {
			o.Status.AccessModes = append(o.Status.AccessModes, pick(r, modes...))
		}
	case *networkingv1.Ingress:
		for i := range o.Spec.Rules {
			o.Spec.Rules[i].Host = pick(r, "", "a.example.com", "b.example.com")
		}
		for range r.IntN(6) {
			o.Spec.Rules = append(o.Spec.Rules, networkingv1.IngressRule{Host: pick(r, "", "c.example.com")})
		}
	case *discoveryv1.EndpointSlice:
		for range r.IntN(5) {
			o.Endpoints = append(o.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1", "10.0.0.2"}[:r.IntN(3)]})
		}
		for range r.IntN(5) {
			o.Ports = append(o.Ports, discoveryv1.EndpointPort{})
		}
	case *batchv1.Job:
		types := []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed, batchv1.JobSuspended, batchv1.JobFailureTarget, batchv1.JobSuccessCriteriaMet}
		for i := range o.Status.Conditions {
			o.Status.Conditions[i].Type = pick(r, types...)
			o.Status.Conditions[i].Status = pick(r, corev1.ConditionTrue, corev1.ConditionFalse)
		}
		if o.Status.CompletionTime != nil && o.Status.StartTime != nil {
			o.Status.CompletionTime = agoPtr(-randomAge(r))
			*o.Status.CompletionTime = metav1.NewTime(o.Status.StartTime.Add(randomAge(r)))
		}
	}
}
