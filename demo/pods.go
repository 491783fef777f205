package demo

import "fmt"

// app describes a workload: what its pods run.
type app struct {
	name     string
	image    string
	port     int
	probe    string         // "http" or "tcp"
	selector map[string]any // pod labels the controller selects on
	extra    map[string]any // further pod labels
}

// podTemplate is the pod template of a workload: two containers (the app
// and a log-shipping sidecar) with env, ports, probes, resources and
// volume mounts.
func podTemplate(a app) map[string]any {
	labels := map[string]any{}
	for k, v := range a.selector {
		labels[k] = v
	}
	for k, v := range a.extra {
		labels[k] = v
	}
	probe := map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "http", "scheme": "HTTP"}}
	if a.probe == "tcp" {
		probe = map[string]any{"tcpSocket": map[string]any{"port": "http"}}
	}
	withTiming := func(p map[string]any, delay int) map[string]any {
		p = clone(p).(map[string]any)
		p["initialDelaySeconds"], p["periodSeconds"], p["timeoutSeconds"] = delay, 10, 1
		p["successThreshold"], p["failureThreshold"] = 1, 3
		return p
	}
	main := map[string]any{
		"name":  a.name,
		"image": a.image,
		"env": []any{
			map[string]any{"name": "LOG_LEVEL", "value": "info"},
			map[string]any{"name": "POD_IP", "valueFrom": map[string]any{"fieldRef": map[string]any{"apiVersion": "v1", "fieldPath": "status.podIP"}}},
			map[string]any{"name": "NODE_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
		},
		"ports": []any{
			map[string]any{"name": "http", "containerPort": a.port, "protocol": "TCP"},
			map[string]any{"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
		},
		"readinessProbe": withTiming(probe, 2),
		"livenessProbe":  withTiming(probe, 15),
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
			"limits":   map[string]any{"cpu": "500m", "memory": "256Mi"},
		},
		"volumeMounts": []any{
			map[string]any{"name": "config", "mountPath": "/etc/" + a.name, "readOnly": true},
			map[string]any{"name": "logs", "mountPath": "/var/log/app"},
		},
		"imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
		"terminationMessagePolicy": "File",
	}
	sidecar := map[string]any{
		"name":           "log-shipper",
		"image":          "cr.fluentbit.io/fluent/fluent-bit:3.2.4",
		"args":           []any{"--config=/fluent-bit/etc/fluent-bit.yaml"},
		"env":            []any{map[string]any{"name": "APP", "value": a.name}},
		"ports":          []any{map[string]any{"name": "fb-metrics", "containerPort": 2020, "protocol": "TCP"}},
		"readinessProbe": withTiming(map[string]any{"httpGet": map[string]any{"path": "/api/v1/health", "port": "fb-metrics", "scheme": "HTTP"}}, 1),
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "10m", "memory": "32Mi"},
			"limits":   map[string]any{"memory": "64Mi"},
		},
		"volumeMounts": []any{
			map[string]any{"name": "logs", "mountPath": "/var/log/app", "readOnly": true},
		},
		"imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
		"terminationMessagePolicy": "File",
	}
	return map[string]any{
		"metadata": map[string]any{
			"labels":      labels,
			"annotations": map[string]any{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
		},
		"spec": map[string]any{
			"containers": []any{main, sidecar},
			"volumes": []any{
				map[string]any{"name": "config", "configMap": map[string]any{"name": a.name + "-config", "defaultMode": 420}},
				map[string]any{"name": "logs", "emptyDir": map[string]any{}},
			},
			"restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
			"serviceAccountName": "default", "securityContext": map[string]any{}, "schedulerName": "default-scheduler",
		},
	}
}

// newPod builds a Pending pod on n from a workload's template (a decoded
// copy the pod may keep), owned by owner, the way the controller and the
// admission chain would create it.
func (c *Cluster) newPod(namespace, name string, tmpl map[string]any, owner map[string]any, n node) map[string]any {
	tmeta, _ := tmpl["metadata"].(map[string]any)
	labels, _ := tmeta["labels"].(map[string]any)
	ann, _ := tmeta["annotations"].(map[string]any)
	md := c.objectMeta(namespace, name, labels, ann)
	md["ownerReferences"] = []any{owner}
	md["generateName"] = name[:len(name)-5]
	spec := tmpl["spec"].(map[string]any)
	token := "kube-api-access-" + c.suffix(5)
	spec["volumes"] = append(asList(spec["volumes"]), map[string]any{"name": token, "projected": map[string]any{
		"defaultMode": 420, "sources": []any{map[string]any{"serviceAccountToken": map[string]any{"expirationSeconds": 3607, "path": "token"}}},
	}})
	for _, ct := range asList(spec["containers"]) {
		ct := ct.(map[string]any)
		ct["volumeMounts"] = append(asList(ct["volumeMounts"]), map[string]any{
			"name": token, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true,
		})
	}
	spec["nodeName"] = n.name
	spec["enableServiceLinks"], spec["priority"], spec["preemptionPolicy"] = true, 0, "PreemptLowerPriority"
	spec["tolerations"] = []any{
		map[string]any{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
		map[string]any{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
	}
	pod := map[string]any{"metadata": md, "spec": spec}
	c.setPodPhase(pod, "Pending", n, nil)
	md["managedFields"] = managedFields(pod, c.timestamp(),
		fieldManager{"kube-controller-manager", "Update", "", "v1", []string{"metadata", "spec"}},
		fieldManager{"kubelet", "Update", "status", "v1", []string{"status"}})
	return pod
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// setPodPhase rewrites a pod's status for phase: Pending (scheduled,
// containers being created, no IP yet), Running (ready, with ips) or
// Succeeded (completed; the IPs are kept, as the kubelet does).
func (c *Cluster) setPodPhase(pod map[string]any, phase string, n node, ips []string) {
	now := c.timestamp()
	st := map[string]any{"phase": phase, "hostIP": n.ipv4, "qosClass": "Burstable"}
	hostIPs := []any{}
	for _, ip := range n.hostIPs() {
		hostIPs = append(hostIPs, map[string]any{"ip": ip})
	}
	st["hostIPs"] = hostIPs
	if old, ok := pod["status"].(map[string]any); ok && old["startTime"] != nil {
		st["startTime"] = old["startTime"]
	} else {
		st["startTime"] = now
	}
	if len(ips) > 0 {
		st["podIP"] = ips[0]
		podIPs := []any{}
		for _, ip := range ips {
			podIPs = append(podIPs, map[string]any{"ip": ip})
		}
		st["podIPs"] = podIPs
	}
	ready := map[string]string{"Pending": "False", "Running": "True", "Succeeded": "False"}[phase]
	cond := func(typ, status, reason string) map[string]any {
		m := map[string]any{"type": typ, "status": status, "lastProbeTime": nil, "lastTransitionTime": now}
		if reason != "" {
			m["reason"] = reason
		}
		return m
	}
	reason := map[string]string{"Pending": "ContainersNotReady", "Succeeded": "PodCompleted"}[phase]
	st["conditions"] = []any{
		cond("PodReadyToStartContainers", map[bool]string{true: "False", false: "True"}[phase == "Pending"], ""),
		cond("Initialized", "True", ""),
		cond("Ready", ready, reason),
		cond("ContainersReady", ready, reason),
		cond("PodScheduled", "True", ""),
	}
	var statuses []any
	for _, ct := range asList(nested(pod, "spec")["containers"]) {
		ct := ct.(map[string]any)
		statuses = append(statuses, c.containerStatus(ct, phase, now))
	}
	st["containerStatuses"] = statuses
	pod["status"] = st
}

func (c *Cluster) containerStatus(ct map[string]any, phase, now string) map[string]any {
	image := ct["image"].(string)
	cs := map[string]any{
		"name": ct["name"], "image": image, "imageID": image + "@sha256:" + c.hexString(64),
		"ready": phase == "Running", "restartCount": 0, "started": phase == "Running",
	}
	switch phase {
	case "Pending":
		cs["state"] = map[string]any{"waiting": map[string]any{"reason": "ContainerCreating"}}
		cs["imageID"] = ""
	case "Running":
		cs["containerID"] = "containerd://" + c.hexString(64)
		cs["state"] = map[string]any{"running": map[string]any{"startedAt": now}}
	default:
		cs["containerID"] = "containerd://" + c.hexString(64)
		cs["state"] = map[string]any{"terminated": map[string]any{
			"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now,
		}}
	}
	return cs
}

// podName is {base}-{suffix}, as a controller names pods.
func (c *Cluster) podName(base string) string { return fmt.Sprintf("%s-%s", base, c.suffix(5)) }
