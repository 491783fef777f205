package table

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

var (
	podsGR  = schema.GroupResource{Resource: "pods"}
	podsGVK = corev1.SchemeGroupVersion.WithKind("Pod")
)

// ago is a whole-second timestamp d before the current second.
func ago(d time.Duration) metav1.Time {
	return metav1.NewTime(time.Now().Truncate(time.Second).Add(-d))
}

func agoPtr(d time.Duration) *metav1.Time { t := ago(d); return &t }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func running(name string, ready bool, restarts int32, lastFinished time.Duration) corev1.ContainerStatus {
	s := corev1.ContainerStatus{Name: name, Ready: ready, RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(time.Hour)}}}
	if lastFinished > 0 {
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: ago(lastFinished)}
	}
	return s
}

func waiting(name, reason string, restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, RestartCount: restarts,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func terminated(name, reason string, code, signal int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, Signal: signal, FinishedAt: ago(3 * time.Minute)}}}
}

func pod(name string, mutate func(p *corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: ago(90 * time.Minute)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}, NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			ContainerStatuses: []corev1.ContainerStatus{running("app", true, 0, 0)}},
	}
	mutate(&p)
	return p
}

func cond(t corev1.PodConditionType, s corev1.ConditionStatus, reason string) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s, Reason: reason}
}

func trickyPods() []corev1.Pod {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	return []corev1.Pod{
		pod("plain", func(p *corev1.Pod) {}),
		pod("crashloop", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("app", "CrashLoopBackOff", 7)}
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(5 * time.Minute)}
		}),
		pod("restarts-ago", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side"})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{running("app", true, 2, 5*time.Minute), running("side", false, 3, 47*time.Second)}
		}),
		pod("restarts-no-last-state", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 4 }),
		pod("init-failing", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i1"}, {Name: "i2"}}
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated("i1", "Completed", 0, 0), terminated("i2", "", 3, 0)}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("app", "PodInitializing", 0)}
		}),
		pod("init-signal", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i1"}}
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated("i1", "", 137, 9)}
		}),
		pod("init-crashloop", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i1"}}
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{waiting("i1", "CrashLoopBackOff", 4)}
			p.Status.InitContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(30 * time.Second)}
		}),
		pod("init-progress", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i1"}, {Name: "i2"}, {Name: "i3"}}
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated("i1", "Completed", 0, 0), {Name: "i2", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, waiting("i3", "PodInitializing", 0)}
		}),
		pod("sidecar-started", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: always}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{running("proxy", true, 2, 10*time.Minute)}
			p.Status.InitContainerStatuses[0].Started = ptr.To(true)
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionTrue, "")}
		}),
		pod("sidecar-not-started", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: always}, {Name: "after"}}
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{running("proxy", false, 1, 3*time.Hour), waiting("after", "", 0)}
			p.Status.InitContainerStatuses[0].Started = ptr.To(false)
		}),
		pod("terminating", func(p *corev1.Pod) { p.DeletionTimestamp = agoPtr(10 * time.Second) }),
		pod("terminating-succeeded", func(p *corev1.Pod) {
			p.DeletionTimestamp = agoPtr(10 * time.Second)
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{terminated("app", "Completed", 0, 0)}
		}),
		pod("nodelost", func(p *corev1.Pod) {
			p.DeletionTimestamp = agoPtr(time.Minute)
			p.Status.Reason = "NodeLost"
		}),
		pod("evicted", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.Reason = "Evicted"
			p.Status.ContainerStatuses = nil
		}),
		pod("completed", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{terminated("app", "Completed", 0, 0)}
		}),
		pod("error", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{terminated("app", "Error", 2, 0)}
		}),
		pod("completed-but-one-running-ready", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "done"})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{running("app", true, 0, 0), terminated("done", "Completed", 0, 0)}
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue, "")}
		}),
		pod("completed-but-one-running-notready", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "done"})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{running("app", true, 0, 0), terminated("done", "Completed", 0, 0)}
		}),
		pod("completed-and-error", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "bad"})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{terminated("bad", "", 1, 0), terminated("app", "Completed", 0, 0)}
		}),
		pod("signal", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{terminated("app", "", 0, 15)}
		}),
		pod("gated", func(p *corev1.Pod) {
			p.Spec.NodeName = ""
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionFalse, corev1.PodReasonSchedulingGated)}}
		}),
		pod("unscheduled-nominated", func(p *corev1.Pod) {
			p.Spec.NodeName = ""
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: "node-9"}
		}),
		pod("readiness-gates", func(p *corev1.Pod) {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "a"}, {ConditionType: "b"}, {ConditionType: "c"}}
			p.Status.Conditions = []corev1.PodCondition{cond("a", corev1.ConditionTrue, ""), cond("b", corev1.ConditionFalse, ""), cond("a", corev1.ConditionFalse, "")}
		}),
		pod("hostnetwork", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Status.PodIP, p.Status.PodIPs = "192.168.1.5", []corev1.PodIP{{IP: "192.168.1.5"}}
		}),
		pod("dual-stack", func(p *corev1.Pod) {
			p.Status.PodIP, p.Status.PodIPs = "10.0.0.2", []corev1.PodIP{{IP: "10.0.0.2"}, {IP: "fd00::2"}}
		}),
		pod("podip-disagrees", func(p *corev1.Pod) {
			p.Status.PodIP, p.Status.PodIPs = "10.0.0.3", []corev1.PodIP{{IP: "fd00::3"}}
		}),
		pod("only-podips", func(p *corev1.Pod) { p.Status.PodIP = "" }),
		pod("no-ip", func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil }),
		pod("no-creation", func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{} }),
		pod("future", func(p *corev1.Pod) { p.CreationTimestamp = ago(-time.Hour) }),
		pod("just-now", func(p *corev1.Pod) { p.CreationTimestamp = ago(-time.Second) }),
	}
}

func TestPodsTricky(t *testing.T) {
	for _, p := range trickyPods() {
		t.Run(p.Name, func(t *testing.T) { agreeBuiltin(t, podsGR, podsGVK, mustJSON(t, p)) })
	}
}

// ages covers every unit of HumanDuration, its boundaries and the future.
func randomAge(r *rand.Rand) time.Duration {
	switch r.IntN(8) {
	case 0:
		return time.Duration(r.IntN(130)) * time.Second
	case 1:
		return time.Duration(r.IntN(200*60)) * time.Second
	case 2:
		return time.Duration(r.IntN(50*3600)) * time.Second
	case 3:
		return time.Duration(r.IntN(10*24*3600)) * time.Second
	case 4:
		return time.Duration(r.IntN(3*365*24*3600)) * time.Second
	case 5:
		return time.Duration(r.Int64N(10*365*24*3600)) * time.Second
	case 6:
		return -time.Duration(r.IntN(5)) * time.Second
	default:
		return []time.Duration{2 * time.Minute, 10 * time.Minute, 3 * time.Hour, 8 * time.Hour, 48 * time.Hour, 8 * 24 * time.Hour}[r.IntN(6)]
	}
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func randomState(r *rand.Rand) corev1.ContainerState {
	switch r.IntN(4) {
	case 0:
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	case 1:
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: pick(r, "", "CrashLoopBackOff", "PodInitializing", "ContainerCreating", "ImagePullBackOff")}}
	case 2:
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: pick(r, "", "Completed", "Error", "OOMKilled"), ExitCode: pick[int32](r, 0, 0, 1, 137), Signal: pick[int32](r, 0, 0, 9), FinishedAt: ago(randomAge(r))}}
	default:
		return corev1.ContainerState{}
	}
}

func randomStatus(r *rand.Rand, name string) corev1.ContainerStatus {
	s := corev1.ContainerStatus{Name: name, Ready: r.IntN(2) == 0, RestartCount: pick[int32](r, 0, 0, 1, 5, 120), State: randomState(r)}
	if r.IntN(2) == 0 {
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(randomAge(r))}
		if r.IntN(5) == 0 {
			s.LastTerminationState.Terminated.FinishedAt = metav1.Time{}
		}
	}
	if r.IntN(3) > 0 {
		s.Started = ptr.To(r.IntN(2) == 0)
	}
	return s
}

// randomPod draws from the values that steer the printer's logic, rather
// than arbitrary strings, so that every branch is taken often.
func randomPod(r *rand.Rand, i int) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "ns", CreationTimestamp: ago(randomAge(r))}}
	for c := range r.IntN(4) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", c)})
	}
	for c := range r.IntN(3) {
		ic := corev1.Container{Name: fmt.Sprintf("i%d", c)}
		if r.IntN(2) == 0 {
			ic.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, ic)
	}
	for _, ic := range p.Spec.InitContainers {
		if r.IntN(5) > 0 {
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, randomStatus(r, ic.Name))
		}
	}
	for _, c := range p.Spec.Containers {
		if r.IntN(6) > 0 {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, randomStatus(r, c.Name))
		}
	}
	p.Status.Phase = pick[corev1.PodPhase](r, "", corev1.PodPending, corev1.PodRunning, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown)
	p.Status.Reason = pick(r, "", "", "", "NodeLost", "Evicted", "Shutdown")
	for range r.IntN(4) {
		p.Status.Conditions = append(p.Status.Conditions, cond(
			pick[corev1.PodConditionType](r, corev1.PodScheduled, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, "gate-a", "gate-b"),
			pick(r, corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown),
			pick(r, "", corev1.PodReasonSchedulingGated, "Unschedulable")))
	}
	for _, g := range []corev1.PodConditionType{"gate-a", "gate-b", "gate-c"} {
		if r.IntN(3) == 0 {
			p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: g})
		}
	}
	if r.IntN(4) == 0 {
		p.DeletionTimestamp = agoPtr(randomAge(r))
	}
	p.Spec.NodeName = pick(r, "", "node-1", "node-2")
	p.Status.NominatedNodeName = pick(r, "", "", "node-3")
	switch r.IntN(5) {
	case 0:
	case 1:
		p.Status.PodIP = "10.1.0.1"
	case 2:
		p.Status.PodIPs = []corev1.PodIP{{IP: "fd00::1"}}
	case 3:
		p.Status.PodIP, p.Status.PodIPs = "10.1.0.2", []corev1.PodIP{{IP: "10.1.0.2"}, {IP: "fd00::2"}}
	default:
		p.Status.PodIP, p.Status.PodIPs = "10.1.0.3", []corev1.PodIP{{IP: "fd00::3"}, {IP: "10.1.0.3"}}
	}
	return p
}

func TestPodsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	for i := range 2000 {
		p := randomPod(r, i)
		agreeBuiltin(t, podsGR, podsGVK, mustJSON(t, p))
		if t.Failed() {
			return
		}
	}
}
