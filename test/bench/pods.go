package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The seeded pods carry this label, and kubeindex, the typed informer and
// the API-server queries all select on it.
const (
	podLabel    = "kubeindex.bench/pod"
	podSelector = podLabel + "=true"
	// noneSelector matches nothing: the empty-cache baselines use it.
	noneSelector = podLabel + "=none"
	// stampKey is the annotation carrying the send time of a churn update
	// (Unix nanoseconds), for event-to-client latency.
	stampKey = "kubeindex.bench/sent"
)

// Layout of the seeded cluster: podsPerNamespace pods per namespace in
// Deployments of podsPerDeployment; one pod in hostNetworkEvery runs with
// hostNetwork (a DaemonSet-like pod sharing its node's IP).
const (
	podsPerNamespace  = 1000
	podsPerDeployment = 50
	podsPerNode       = 100
	hostNetworkEvery  = 20
)

// podRef is what the load generators need to know of a seeded pod.
type podRef struct {
	Namespace, Name, IP string
	HostNetwork         bool
}

// plan is the deterministic layout of N pods: the same N gives the same
// names and addresses, so a reused cluster needs no listing.
type plan struct{ n int }

func (p plan) namespaces() []string {
	var out []string
	for i := 0; i < (p.n+podsPerNamespace-1)/podsPerNamespace; i++ {
		out = append(out, fmt.Sprintf("bench-%03d", i))
	}
	return out
}

func (p plan) ref(i int) podRef {
	dep := (i % podsPerNamespace) / podsPerDeployment
	r := podRef{Namespace: fmt.Sprintf("bench-%03d", i/podsPerNamespace),
		Name:        fmt.Sprintf("%s-%s-%05d", appName(dep), rsHash(i/podsPerDeployment), i),
		HostNetwork: i%hostNetworkEvery == hostNetworkEvery-1}
	if r.HostNetwork {
		r.IP = nodeIP(i / podsPerNode)
	} else {
		r.IP = fmt.Sprintf("10.%d.%d.%d", 64+i>>16, (i>>8)&255, i&255)
	}
	return r
}

// firstSelector is a field selector the API server matches with exactly
// the plan's first m pods, without a label the pods do not already carry
// (a seeded cluster is reused as it is): it excludes the namespaces after
// the one pod m falls in, and in that one the pods from m on by name.
// Empty when m covers the plan. One informer, as for all the pods: a
// namespaces list in kubeindex's configuration would run one per
// namespace.
func (p plan) firstSelector(m int) string {
	if m >= p.n {
		return ""
	}
	m = max(m, 0)
	var terms []string
	ns := m / podsPerNamespace // the namespace pod m falls in
	if m%podsPerNamespace != 0 {
		for i := m; i < min(p.n, (ns+1)*podsPerNamespace); i++ {
			terms = append(terms, "metadata.name!="+p.ref(i).Name)
		}
		ns++
	}
	for ; ns < len(p.namespaces()); ns++ {
		terms = append(terms, fmt.Sprintf("metadata.namespace!=bench-%03d", ns))
	}
	return strings.Join(terms, ",")
}

func appName(dep int) string {
	names := []string{"checkout", "payments", "catalog", "search", "frontend", "cart", "auth", "ledger", "mailer", "reviews"}
	return fmt.Sprintf("%s-%d", names[dep%len(names)], dep/len(names))
}

func rsHash(n int) string {
	h := sha256.Sum256([]byte("rs" + strconv.Itoa(n)))
	return hex.EncodeToString(h[:])[:10]
}

func nodeName(n int) string { return fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", n>>8, n&255) }
func nodeIP(n int) string   { return fmt.Sprintf("172.20.%d.%d", n>>8, n&255) }

// newPod is pod i of a typical Deployment, without status: two containers
// with env, ports, probes, resources and volume mounts, an owner reference,
// labels and annotations.
func (p plan) newPod(i int) *corev1.Pod {
	r := p.ref(i)
	dep := (i % podsPerNamespace) / podsPerDeployment
	app := appName(dep)
	hash := rsHash(i / podsPerDeployment)
	sum := sha256.Sum256([]byte(app))
	probe := func(path string, port int32, delay int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: delay, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3, SuccessThreshold: 1}
	}
	env := []corev1.EnvVar{
		{Name: "APP_NAME", Value: app},
		{Name: "APP_ENV", Value: "production"},
		{Name: "LOG_LEVEL", Value: "info"},
		{Name: "DATABASE_URL", Value: "postgres://" + app + "-db.svc.cluster.local:5432/" + app},
		{Name: "CACHE_URL", Value: "redis://redis-master.cache.svc.cluster.local:6379/0"},
		{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability:4317"},
		{Name: "FEATURE_FLAGS", Value: "new-checkout,fast-search,beta-ui"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "API_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: app + "-secrets"}, Key: "api-token"}}},
	}
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
		}
	}
	trueVal, falseVal := true, false
	grace := int64(30)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.Namespace, Name: r.Name,
			Labels: map[string]string{podLabel: "true", "app": app, "app.kubernetes.io/name": app,
				"app.kubernetes.io/part-of": "shop", "pod-template-hash": hash, "tier": "backend", "version": "v1.42.0"},
			Annotations: map[string]string{
				"checksum/config":      hex.EncodeToString(sum[:]),
				"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "prometheus.io/path": "/metrics",
				"kubectl.kubernetes.io/restartedAt": "2026-11-20T08:15:00Z",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
				Name: app + "-" + hash, UID: types.UID(fmt.Sprintf("6f1c0e2a-%04x-4b8e-9c1d-%012x", dep, i/podsPerDeployment)),
				Controller: &trueVal, BlockOwnerDeletion: &trueVal}},
		},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName(i / podsPerNode),
			HostNetwork:                   r.HostNetwork,
			ServiceAccountName:            "default",
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/shop/" + app + ":v1.42.0",
				Args:  []string{"--config=/etc/" + app + "/config.yaml", "--listen=:8080"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
				Env:   env, Resources: res("250m", "512Mi"),
				LivenessProbe: probe("/healthz", 8080, 10), ReadinessProbe: probe("/readyz", 8080, 5),
				VolumeMounts:    []corev1.VolumeMount{{Name: "config", MountPath: "/etc/" + app, ReadOnly: true}, {Name: "tmp", MountPath: "/tmp"}},
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: &trueVal, AllowPrivilegeEscalation: &falseVal, ReadOnlyRootFilesystem: &trueVal},
				ImagePullPolicy: corev1.PullIfNotPresent,
			}, {
				Name: "envoy", Image: "registry.example.com/mesh/envoy:v1.31.2",
				Args:  []string{"--config-path", "/etc/envoy/envoy.yaml", "--service-cluster", app},
				Ports: []corev1.ContainerPort{{Name: "envoy-admin", ContainerPort: 15000, Protocol: corev1.ProtocolTCP}},
				Env:   env[:3], Resources: res("100m", "128Mi"),
				ReadinessProbe:  probe("/ready", 15000, 1),
				VolumeMounts:    []corev1.VolumeMount{{Name: "envoy-config", MountPath: "/etc/envoy", ReadOnly: true}},
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}},
				{Name: "envoy-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "envoy-" + app}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	return pod
}

// setStatus fills in what a kubelet reports for a running pod.
func (p plan) setStatus(pod *corev1.Pod, i int) {
	r := p.ref(i)
	start := metav1.NewTime(time.Date(2026, 11, 20, 8, 15, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: start}
	}
	hostIP := nodeIP(i / podsPerNode)
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{cond("PodReadyToStartContainers"), cond(corev1.PodInitialized),
			cond(corev1.PodReady), cond(corev1.ContainersReady), cond(corev1.PodScheduled)},
		HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}},
		PodIP: r.IP, PodIPs: []corev1.PodIP{{IP: r.IP}},
		StartTime: &start,
		QOSClass:  corev1.PodQOSBurstable,
	}
	for k, c := range pod.Spec.Containers {
		h := sha256.Sum256([]byte(c.Image))
		cid := sha256.Sum256([]byte(pod.Name + c.Name))
		started := true
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + hex.EncodeToString(h[:]),
			ContainerID: "containerd://" + hex.EncodeToString(cid[:]),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
			Ready:       true, Started: &started,
		})
		if k == 0 {
			pod.Status.ContainerStatuses[k].RestartCount = p.restarts(i)
		}
	}
}

// restarts is how often pod i's app container has restarted: one pod in
// eight, 1 to 15 times, so that a sort by restarts has a spread and ties.
func (p plan) restarts(i int) int32 {
	if i%8 != 3 {
		return 0
	}
	return int32(1 + (i/8)%15)
}
