package table

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeUnreachablePodReason is the reason the node lifecycle controller gives
// pods of a node it lost (k8s.io/kubernetes/pkg/util/node).
const nodeUnreachablePodReason = "NodeLost"

var (
	podSuccessConditions = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	podFailedConditions  = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
)

func podPrinter() Convertor {
	return printer[podView]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
		{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
		{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
		ageColumn,
		{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
		{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
		{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
		{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
	}, cells: podCells, scan: scanPod}
}

// podView is the part of a v1 Pod the printer reads, under the same JSON
// names: decoding only these (decode skips the rest without building
// it) is what makes rows cheap; test/table proves the result the
// printer's on whole pods.
// The members of anyValue types are the bulk of a pod the printer does
// not read, named so that they are passed over whole (skip.go).
type podView struct {
	Metadata struct {
		Name              string       `json:"name"`
		CreationTimestamp metav1.Time  `json:"creationTimestamp"`
		DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`

		Labels          anyValue `json:"labels"`
		Annotations     anyValue `json:"annotations"`
		OwnerReferences anyValue `json:"ownerReferences"`
		ManagedFields   anyValue `json:"managedFields"`
	} `json:"metadata"`
	Spec struct {
		Containers     []anObject `json:"containers"`
		InitContainers []struct {
			Name          string                         `json:"name"`
			RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy"`

			containerBulk
		} `json:"initContainers"`
		NodeName       string                    `json:"nodeName"`
		ReadinessGates []corev1.PodReadinessGate `json:"readinessGates"`

		Volumes         anyValue `json:"volumes"`
		Tolerations     anyValue `json:"tolerations"`
		Affinity        anyValue `json:"affinity"`
		SecurityContext anyValue `json:"securityContext"`
		TopologySpread  anyValue `json:"topologySpreadConstraints"`
	} `json:"spec"`
	Status podStatusView `json:"status"`
}

// containerBulk are the members of a container the printer does not read
// that hold most of its bytes.
type containerBulk struct {
	Command         anyValue `json:"command"`
	Args            anyValue `json:"args"`
	Env             anyValue `json:"env"`
	Ports           anyValue `json:"ports"`
	Resources       anyValue `json:"resources"`
	VolumeMounts    anyValue `json:"volumeMounts"`
	LivenessProbe   anyValue `json:"livenessProbe"`
	ReadinessProbe  anyValue `json:"readinessProbe"`
	StartupProbe    anyValue `json:"startupProbe"`
	SecurityContext anyValue `json:"securityContext"`
}

type podStatusView struct {
	Phase                 corev1.PodPhase       `json:"phase"`
	Reason                string                `json:"reason"`
	Conditions            []podCondition        `json:"conditions"`
	InitContainerStatuses []containerStatusView `json:"initContainerStatuses"`
	ContainerStatuses     []containerStatusView `json:"containerStatuses"`
	PodIP                 string                `json:"podIP"`
	PodIPs                []struct {
		IP string `json:"ip"`
	} `json:"podIPs"`
	NominatedNodeName string `json:"nominatedNodeName"`
}

type podCondition struct {
	Type   corev1.PodConditionType `json:"type"`
	Status corev1.ConditionStatus  `json:"status"`
	Reason string                  `json:"reason"`
}

type containerStatusView struct {
	Name                 string                `json:"name"`
	State                corev1.ContainerState `json:"state"`
	LastTerminationState struct {
		Terminated *struct {
			FinishedAt metav1.Time `json:"finishedAt"`
		} `json:"terminated"`
	} `json:"lastState"`
	Ready        bool  `json:"ready"`
	RestartCount int32 `json:"restartCount"`
	Started      *bool `json:"started"`
}

func isRestartableInit(p *corev1.ContainerRestartPolicy) bool {
	return p != nil && *p == corev1.ContainerRestartPolicyAlways
}

// podCells follows the pod printer's reasoning step by step, on the v1
// object rather than the internal one (the only conversion that matters
// here is that of podIP and podIPs, see podIP).
func podCells(pod *podView, now time.Time) ([]any, []metav1.TableRowCondition) {
	restarts, initRestarts := 0, 0
	total := len(pod.Spec.Containers)
	ready := 0
	var lastRestart, lastInitRestart metav1.Time

	phase := pod.Status.Phase
	reason := string(phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	var conds []metav1.TableRowCondition
	switch phase {
	case corev1.PodSucceeded:
		conds = podSuccessConditions
	case corev1.PodFailed:
		conds = podFailedConditions
	}

	// The printer looks init containers up by name: the last of a name wins.
	restartableInit := func(name string) bool {
		var p *corev1.ContainerRestartPolicy
		for i := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name == name {
				p = pod.Spec.InitContainers[i].RestartPolicy
			}
		}
		return isRestartableInit(p)
	}
	for i := range pod.Spec.InitContainers {
		if isRestartableInit(pod.Spec.InitContainers[i].RestartPolicy) {
			total++
		}
	}

	initializing := false
	for i := range pod.Status.InitContainerStatuses {
		c := &pod.Status.InitContainerStatuses[i]
		restarts += int(c.RestartCount)
		if t := c.LastTerminationState.Terminated; t != nil && lastRestart.Before(&t.FinishedAt) {
			lastRestart = t.FinishedAt
		}
		restartable := restartableInit(c.Name)
		if restartable {
			initRestarts += int(c.RestartCount)
			if t := c.LastTerminationState.Terminated; t != nil && lastInitRestart.Before(&t.FinishedAt) {
				lastInitRestart = t.FinishedAt
			}
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case restartable && c.Started != nil && *c.Started:
			if c.Ready {
				ready++
			}
			continue
		case c.State.Terminated != nil:
			switch t := c.State.Terminated; {
			case t.Reason != "":
				reason = "Init:" + t.Reason
			case t.Signal != 0:
				reason = "Init:Signal:" + strconv.Itoa(int(t.Signal))
			default:
				reason = "Init:ExitCode:" + strconv.Itoa(int(t.ExitCode))
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
		default:
			reason = "Init:" + strconv.Itoa(i) + "/" + strconv.Itoa(len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || podInitialized(&pod.Status) {
		restarts = initRestarts
		lastRestart = lastInitRestart
		hasRunning := false
		errorReason := ""
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := &pod.Status.ContainerStatuses[i]
			restarts += int(c.RestartCount)
			if t := c.LastTerminationState.Terminated; t != nil && lastRestart.Before(&t.FinishedAt) {
				lastRestart = t.FinishedAt
			}
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil:
				switch t := c.State.Terminated; {
				case t.Reason != "":
					reason = t.Reason
				case t.Signal != 0:
					reason = "Signal:" + strconv.Itoa(int(t.Signal))
				default:
					reason = "ExitCode:" + strconv.Itoa(int(t.ExitCode))
				}
				if c.State.Terminated.ExitCode != 0 {
					errorReason = reason
				}
			case c.Ready && c.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		if reason == "Completed" {
			switch {
			case hasRunning && podReady(pod.Status.Conditions):
				reason = "Running"
			case errorReason != "":
				reason = errorReason
			case hasRunning:
				reason = "NotReady"
			}
		}
	}

	if pod.Metadata.DeletionTimestamp != nil && pod.Status.Reason == nodeUnreachablePodReason {
		reason = "Unknown"
	} else if pod.Metadata.DeletionTimestamp != nil && phase != corev1.PodFailed && phase != corev1.PodSucceeded {
		reason = "Terminating"
	}

	restartsCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsCell += " (" + since(lastRestart, now) + " ago)"
	}

	ip := podIP(&pod.Status)
	if ip == "" {
		ip = "<none>"
	}
	node := orNone(pod.Spec.NodeName)
	nominated := orNone(pod.Status.NominatedNodeName)
	gates := "<none>"
	if len(pod.Spec.ReadinessGates) > 0 {
		n := 0
		for _, g := range pod.Spec.ReadinessGates {
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType {
					if c.Status == corev1.ConditionTrue {
						n++
					}
					break
				}
			}
		}
		gates = strconv.Itoa(n) + "/" + strconv.Itoa(len(pod.Spec.ReadinessGates))
	}
	return []any{
		pod.Metadata.Name,
		strconv.Itoa(ready) + "/" + strconv.Itoa(total),
		reason,
		restartsCell,
		since(pod.Metadata.CreationTimestamp, now),
		ip, node, nominated, gates,
	}, conds
}

// podIP is the first of the internal object's podIPs: v1's podIP wins
// when set (Convert_v1_PodStatus_To_core_PodStatus), else podIPs[0].
func podIP(s *podStatusView) string {
	if s.PodIP != "" {
		return s.PodIP
	}
	if len(s.PodIPs) > 0 {
		return s.PodIPs[0].IP
	}
	return ""
}

func podInitialized(s *podStatusView) bool {
	for _, c := range s.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(conds []podCondition) bool {
	for _, c := range conds {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
