package cluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// seeder carries one Seed call's state; each step appends to out.
type seeder struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
	o   SeedOptions
	ips *ipAlloc
	out *Seeded
}

func (s *seeder) labels(extra map[string]string) map[string]string {
	l := map[string]string{SeedLabel: s.o.Prefix}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// EnsureNamespace creates a namespace (if missing) and its "default"
// ServiceAccount, which a controller-manager would create and without which
// ServiceAccount admission rejects every pod in the namespace.
func EnsureNamespace(ctx context.Context, cs kubernetes.Interface, ns *corev1.Namespace) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
	if _, err := cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (s *seeder) namespaces(ctx context.Context) error {
	teams := []string{"team-a", "team-b"}
	for i := range s.o.Namespaces {
		name := fmt.Sprintf("%s-ns-%d", s.o.Prefix, i)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.labels(map[string]string{"team": teams[i%len(teams)]})}}
		if err := EnsureNamespace(ctx, s.cs, ns); err != nil {
			return err
		}
		s.out.Namespaces = append(s.out.Namespaces, name)
	}
	s.out.SystemNamespace = s.o.Prefix + "-system"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.out.SystemNamespace, Labels: s.labels(nil)}}
	return EnsureNamespace(ctx, s.cs, ns)
}

func (s *seeder) nodes(ctx context.Context) error {
	for i := range s.o.Nodes {
		name := fmt.Sprintf("%s-node-%d", s.o.Prefix, i)
		ip := s.ips.node(i)
		n, err := s.cs.CoreV1().Nodes().Create(ctx, newNode(name, s.labels(map[string]string{
			"kubernetes.io/hostname":      name,
			"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%3),
		})), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		n.Status = readyNodeStatus(name, ip)
		if n, err = s.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		s.out.Nodes = append(s.out.Nodes, n)
		s.out.NodeIPs[name] = ip
	}
	return nil
}

// workloads creates, in each namespace, Deployments "web" (IPv4 pods,
// single-stack Service) and "api" (dual-stack pods, PreferDualStack
// Service), each with the ReplicaSet and pods a controller would make.
func (s *seeder) workloads(ctx context.Context) error {
	for _, ns := range s.out.Namespaces {
		for _, app := range []struct {
			name      string
			image     string
			dualStack bool
		}{
			{"web", "nginx:1.27", false},
			{"api", "example.com/api:2.3.1", true},
		} {
			if err := s.deployment(ctx, ns, app.name, app.image, app.dualStack); err != nil {
				return err
			}
			if err := s.service(ctx, ns, app.name, app.dualStack); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *seeder) deployment(ctx context.Context, ns, app, image string, dualStack bool) error {
	tmpl := podTemplate(s.labels(map[string]string{"app": app}), image)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: s.labels(map[string]string{"app": app})},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(s.o.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: tmpl,
		},
	}
	d, err := s.cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	s.out.Deployments = append(s.out.Deployments, d)

	hash := templateHash(ns, app)
	rsTmpl := *tmpl.DeepCopy()
	rsTmpl.Labels["pod-template-hash"] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: app + "-" + hash, Namespace: ns, Labels: rsTmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef(d, "apps/v1", "Deployment")},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: d.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app, "pod-template-hash": hash}},
			Template: rsTmpl,
		},
	}
	if rs, err = s.cs.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		return err
	}
	s.out.ReplicaSets = append(s.out.ReplicaSets, rs)

	for i := range s.o.Replicas {
		node := s.out.Nodes[(len(s.out.Pods)+i)%len(s.out.Nodes)]
		v4, v6 := s.ips.pod()
		ips := []string{v4}
		if dualStack {
			ips = append(ips, v6)
		}
		pod := podFromTemplate(ns, rs.Name+"-"+podSuffix(ns, rs.Name, i), rsTmpl, controllerRef(rs, "apps/v1", "ReplicaSet"), node.Name)
		if err := s.createPod(ctx, pod, runningStatus(pod, ips, s.out.NodeIPs[node.Name])); err != nil {
			return err
		}
	}
	return nil
}

func (s *seeder) service(ctx context.Context, ns, app string, dualStack bool) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: s.labels(map[string]string{"app": app})},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intOrString(8080)}},
		},
	}
	if dualStack {
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	}
	svc, err := s.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	s.out.Services = append(s.out.Services, svc)
	return nil
}

// daemonSets creates two host-network DaemonSets with a pod on every node:
// each node's IP is then the pod IP of two pods.
func (s *seeder) daemonSets(ctx context.Context) error {
	ns := s.out.SystemNamespace
	for _, name := range []string{"node-agent", "log-agent"} {
		tmpl := podTemplate(s.labels(map[string]string{"app": name}), "example.com/"+name+":1.0")
		tmpl.Spec.HostNetwork = true
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: s.labels(map[string]string{"app": name})},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: tmpl,
			},
		}
		ds, err := s.cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		s.out.DaemonSets = append(s.out.DaemonSets, ds)
		for i, node := range s.out.Nodes {
			pod := podFromTemplate(ns, name+"-"+podSuffix(ns, name, i), tmpl, controllerRef(ds, "apps/v1", "DaemonSet"), node.Name)
			ip := s.out.NodeIPs[node.Name]
			if err := s.createPod(ctx, pod, runningStatus(pod, []string{ip}, ip)); err != nil {
				return err
			}
		}
	}
	return nil
}

// job creates a finished Job whose Succeeded pod had the IP that the first
// "web" pod now has: a lookup by that IP must see both.
func (s *seeder) job(ctx context.Context) error {
	ns := s.out.Namespaces[0]
	var reused *corev1.Pod
	for _, p := range s.out.Pods {
		if p.Namespace == ns && p.Labels["app"] == "web" {
			reused = p
			break
		}
	}
	if reused == nil {
		return fmt.Errorf("no web pod in %s to reuse the IP of", ns)
	}
	tmpl := podTemplate(s.labels(map[string]string{"app": "report"}), "example.com/report:1.0")
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: ns, Labels: s.labels(map[string]string{"app": "report"})},
		Spec:       batchv1.JobSpec{Template: tmpl, BackoffLimit: ptr.To(int32(0))},
	}
	job, err := s.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	s.out.Jobs = append(s.out.Jobs, job)
	// The API server added the controller-uid labels to the template.
	pod := podFromTemplate(ns, "report-"+podSuffix(ns, "report", 0), job.Spec.Template, controllerRef(job, "batch/v1", "Job"), reused.Spec.NodeName)
	s.out.ReusedIP = reused.Status.PodIP
	return s.createPod(ctx, pod, succeededStatus(pod, reused.Status.PodIP, reused.Status.HostIP))
}

// createPod creates a pod, then writes its status through the status
// subresource, as the kubelet would (status on create is dropped).
func (s *seeder) createPod(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	created, err := s.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	status.QOSClass = created.Status.QOSClass // set on create, immutable
	created.Status = status
	updated, err := s.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	s.out.Pods = append(s.out.Pods, updated)
	return nil
}
