package table

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// variedPods are pods of the shapes the printer tells apart, as an API
// server writes them (encoding/json of the v1 type): init containers
// running, failed and done; sidecars (restartable init containers)
// started or not; containers waiting, running, terminated by a signal
// or an exit code; terminating, evicted, lost with their node;
// readiness gates met and not; scheduling gates; an unknown phase; dual
// stack; and every combination random draws make of them.
func variedPods(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	at := func() metav1.Time {
		return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, rng.IntN(300), 0, time.UTC))
	}
	state := func() corev1.ContainerState {
		switch rng.IntN(5) {
		case 0:
			return corev1.ContainerState{}
		case 1:
			return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: pick("", "CrashLoopBackOff", "ImagePullBackOff", "PodInitializing", "ContainerCreating"), Message: "back-off 5m0s"}}
		case 2:
			return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at()}}
		default:
			return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: []int32{0, 1, 137}[rng.IntN(3)], Signal: int32(rng.IntN(2) * 9), Reason: pick("", "Completed", "Error", "OOMKilled"),
				Message: "done", StartedAt: at(), FinishedAt: at(), ContainerID: "containerd://abc"}}
		}
	}
	status := func(name string) corev1.ContainerStatus {
		cs := corev1.ContainerStatus{Name: name, State: state(), Ready: rng.IntN(2) == 0, RestartCount: int32(rng.IntN(4)),
			Image: "registry.example/app:v1", ImageID: "sha256:0123", ContainerID: "containerd://0123"}
		if rng.IntN(2) == 0 {
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: at()}}
		}
		if rng.IntN(3) > 0 {
			started := rng.IntN(2) == 0
			cs.Started = &started
		}
		return cs
	}
	always := corev1.ContainerRestartPolicyAlways
	var out [][]byte
	for i := range n {
		p := corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "ns", UID: "u", ResourceVersion: "7",
				CreationTimestamp: at(), Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "ünïcode \"quoted\""}},
			Spec: corev1.PodSpec{NodeName: pick("", "node-1", "node-2")},
			Status: corev1.PodStatus{Phase: corev1.PodPhase(pick("Pending", "Running", "Succeeded", "Failed", "Unknown", "Weird")),
				HostIP: "10.0.0.1", StartTime: &metav1.Time{Time: at().Time}},
		}
		for c := range 1 + rng.IntN(3) {
			name := fmt.Sprintf("c%d", c)
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: name, Image: "app", Args: []string{"--x"},
				Env: []corev1.EnvVar{{Name: "A", Value: "1"}}, Ports: []corev1.ContainerPort{{ContainerPort: 80}}})
			if rng.IntN(4) > 0 {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, status(name))
			}
		}
		for c := range rng.IntN(3) {
			name := fmt.Sprintf("init%d", c)
			ic := corev1.Container{Name: name, Image: "init"}
			if rng.IntN(2) == 0 {
				ic.RestartPolicy = &always // a sidecar
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, ic)
			if rng.IntN(4) > 0 {
				p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, status(name))
			}
		}
		for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.PodScheduled, "example.com/gate"} {
			if rng.IntN(3) > 0 {
				c := corev1.PodCondition{Type: t, Status: corev1.ConditionStatus(pick("True", "False", "Unknown")), LastTransitionTime: at(), Message: "m"}
				if t == corev1.PodScheduled && rng.IntN(2) == 0 {
					c.Reason = corev1.PodReasonSchedulingGated
				}
				p.Status.Conditions = append(p.Status.Conditions, c)
			}
		}
		if rng.IntN(3) == 0 {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}, {ConditionType: "example.com/other"}}
		}
		switch rng.IntN(6) {
		case 0: // terminating
			p.DeletionTimestamp = &metav1.Time{Time: at().Time}
		case 1: // evicted
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
		case 2: // its node lost
			p.DeletionTimestamp = &metav1.Time{Time: at().Time}
			p.Status.Reason = nodeUnreachablePodReason
		}
		if p.Spec.NodeName != "" {
			p.Status.PodIP = "10.1.0.7"
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.1.0.7"}, {IP: "fd00::7"}}
			if rng.IntN(3) == 0 {
				p.Status.PodIP = "" // podIPs alone
			}
		}
		p.Status.NominatedNodeName = pick("", "node-3")
		raw, err := json.Marshal(&p)
		if err != nil {
			panic(err)
		}
		out = append(out, raw)
	}
	return out
}

// referenceView is the view sigs.k8s.io/json fills, as the API server
// reads JSON.
func referenceView(raw []byte) (podView, error) {
	var v podView
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &v)
	return v, err
}

// TestScanPodAsTheAPIServer: the scan reads every varied pod itself (no
// fall back to decode) and fills the view sigs.k8s.io/json fills, so its
// rows are the reference's; k8s.io/api's fixtures and their variants
// agree too, read by the scan or left to decode.
func TestScanPodAsTheAPIServer(t *testing.T) {
	p := podPrinter().(printer[podView])
	for i, raw := range variedPods(2000, 1) {
		var got podView
		if !scanPod(raw, &got) {
			t.Fatalf("pod %d: the scan gives up on\n%s", i, raw)
		}
		want, err := referenceView(raw)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("pod %d: view of\n%s\n got %+v\nwant %+v, %v", i, raw, got, want, err)
		}
		gotRow, _ := p.Row(raw, now)
		wantRow, _ := p.referenceRow(raw, now)
		if !reflect.DeepEqual(gotRow, wantRow) {
			t.Fatalf("pod %d: row %v; want %v", i, gotRow, wantRow)
		}
	}
	scanned := 0
	for _, raw := range apiFixtures(t) {
		if !ofResource(raw, "pods") {
			continue
		}
		for _, v := range variants(raw) {
			checkScan(t, v)
			if scanPod(v, new(podView)) {
				scanned++
			}
		}
	}
	if scanned < 2 {
		t.Errorf("the scan read %d of the fixtures' pods", scanned)
	}
}

// checkScan fails when the scan reads raw, valid JSON, and the
// reference does not, or fills another view. Of what is not JSON the
// reference reads nothing, and the scan reads a pod only when its
// syntax errors lie in objects and arrays the view passes over (scan.go):
// never what an API server writes.
func checkScan(t *testing.T, raw []byte) {
	t.Helper()
	var got podView
	if !scanPod(raw, &got) {
		return
	}
	want, err := referenceView(raw)
	if err != nil && !json.Valid(raw) {
		return
	}
	if err != nil {
		t.Fatalf("the scan reads what sigs.k8s.io/json refuses (%v):\n%q", err, raw)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("view of %q:\n got %+v\nwant %+v", raw, got, want)
	}
}

// TestScanPodGivesUp: what the scan must leave to decode, or read as
// the reference does: duplicates, other types, escapes, bad syntax in
// the members it passes over.
func TestScanPodGivesUp(t *testing.T) {
	for _, raw := range []string{
		`{"metadata":{"name":"a","name":"b"}}`,
		`{"metadata":{"name":"a"},"metadata":{"creationTimestamp":null}}`,
		`{"metadata":{"name":"a\u0062"}}`,
		`{"metadata":{"labels":tru}}`,
		`{"metadata":{"labels":01}}`,
		`{"metadata":{"namespace":"` + "\x01" + `"}}`,
		`{"metadata":{"namespace":"\x"}}`,
		`{"metadata":{"labels" {}}}`,
		`{"metadata":{"labels":{},}}`,
		`{"metadata":{"labels":{"a":"b"}`,
		`{"metadata":{"labels":{"a":"b}}}`,
		`{"metadata":{"labels":{"a":"b"}}]}`,
		`{"spec":{"containers":["x"]}}`,
		`{"spec":{"containers":[1]}}`,
		`{"status":{"containerStatuses":[{"restartCount":1.5}]}}`,
		`{"status":{"containerStatuses":[{"restartCount":1e2}]}}`,
		`{"status":{"containerStatuses":[{"restartCount":4294967296}]}}`,
		`{"status":{"containerStatuses":[{"ready":"yes"}]}}`,
		`{"status":{"containerStatuses":[{"state":{"running":{"startedAt":"yesterday"}}}]}}`,
		`{"status":{"phase":7}}`,
		`{"status":7}`,
		`{"status":{}} x`,
		`[]`,
		`null`,
		`{"metadata":{"name":"` + "\xff" + `"}}`,
	} {
		if scanPod([]byte(raw), new(podView)) {
			t.Errorf("the scan reads %s", raw)
		}
		checkScan(t, []byte(raw))
	}
	for _, raw := range []string{
		`{}`,
		`{"metadata":null,"spec":null,"status":null}`,
		`{"metadata":{"labels":{"a":"` + "ü\xff" + `","b":[1,-0.5e+3,true,false,null,{}]}},"x":"\"\\\/\b\f\n\r\t\u00e9"}`,
		`{"status":{"containerStatuses":[null,{"started":null,"lastState":{"terminated":null}}],"conditions":[null]}}`,
		` {"spec":{"containers":[null,{}],"initContainers":[{"restartPolicy":null}]}} `,
	} {
		if !scanPod([]byte(raw), new(podView)) {
			t.Errorf("the scan gives up on %s", raw)
		}
		checkScan(t, []byte(raw))
	}
	// Not JSON, but only inside an object the view passes over, which it
	// reads only to its end: no API server writes these.
	for _, raw := range []string{
		`{"metadata":{"labels":{"a":tru}}}`,
		`{"metadata":{"labels":{"a":01}}}`,
		`{"metadata":{"labels":{"a":"` + "\x01" + `"}}}`,
		`{"metadata":{"labels":{"a":"\x"}}}`,
		`{"metadata":{"labels":{"a" "b"}}}`,
		`{"metadata":{"labels":{"a":"b",}}}`,
		`{"metadata":{"labels":{"a":["b"}}}}`,
	} {
		var v podView
		if !scanPod([]byte(raw), &v) || !reflect.DeepEqual(v, podView{}) {
			t.Errorf("the scan reads %s as %+v", raw, v)
		}
	}
}

// FuzzScanPod: whatever the bytes, what the scan reads is what
// sigs.k8s.io/json reads.
func FuzzScanPod(f *testing.F) {
	for _, raw := range variedPods(20, 2) {
		f.Add(raw)
	}
	if raw, err := os.ReadFile("../../cache/testdata/pod.json"); err == nil {
		f.Add(raw)
	}
	f.Add([]byte(podJSON))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkScan(t, raw)
	})
}

// TestScanPodPassesOverAnyValue: a member the view does not read, of any
// shape (escapes, unicode, nulls, nested arrays and objects, numbers in
// exponent form, white space), added to each object of a pod, is passed
// over: the scan still reads the pod itself, and fills the view
// sigs.k8s.io/json fills.
func TestScanPodPassesOverAnyValue(t *testing.T) {
	values := []string{
		`"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, `"ünïcode ✓ 日本` + "\xff" + `"`, `null`, `[[],[[1,[2]]],{}]`,
		`{"a":{"b":[null,true,false]}}`, `[1e2,-1.5E-3,0,-0,1.0e+10]`, ` { "a" : [ 1 , "b" ] } `, "[\n\t1,\r\n2]",
		`{"x\"y":"{\"a\":[1,2]}"}`, `""`, `-0.0`, `true`,
	}
	k := 0
	for i, raw := range variedPods(300, 4) {
		var b []byte
		for j := 0; j < len(raw); j++ {
			b = append(b, raw[j])
			if raw[j] == '{' && j+1 < len(raw) && raw[j+1] == '"' {
				b = append(b, `"zz":`+values[k%len(values)]+`,`...)
				k++
			}
		}
		var got podView
		if !scanPod(b, &got) {
			t.Fatalf("pod %d: the scan gives up on\n%s", i, b)
		}
		checkScan(t, b)
	}
}

// TestKnown: known is string(b) for the values it keeps and for any
// other, and keeps its values without allocating.
func TestKnown(t *testing.T) {
	for _, s := range []string{"True", "False", "Unknown", "Running", "Ready", "PodScheduled", "CrashLoopBackOff", "Always",
		"", "Tru", "Truee", "true", "node-1", "Ready "} {
		b := []byte(s)
		if got := known(b); got != s {
			t.Errorf("known(%q) = %q", s, got)
		}
	}
	for s, want := range map[string]float64{"ContainersReady": 0, "node-1": 1} {
		b := []byte(s)
		if n := testing.AllocsPerRun(100, func() { knownSink = known(b) }); n != want {
			t.Errorf("known(%q) allocates %v times; want %v", b, n, want)
		}
	}
}

var knownSink string

// TestPodContainersStandIn: a pod whose spec.containers stand in for
// themselves (PodContainersStandIn) is read by the scan as the pod (the
// same view, or given up on alike), for the varied pods and for
// containers of every shape spliced into one; containers the scan does
// not read have no stand-in.
func TestPodContainersStandIn(t *testing.T) {
	check := func(raw []byte, from, to int, mustRead bool) {
		t.Helper()
		standIn, ok := PodContainersStandIn([]byte("kept"), raw[from:to])
		var want podView
		wantOK := scanPod(raw, &want)
		if !ok {
			if wantOK || mustRead {
				t.Fatalf("no stand-in for the containers %s, which the scan reads", raw[from:to])
			}
			return
		}
		if string(standIn[:4]) != "kept" {
			t.Fatalf("the stand-in %q is not appended to what was given", standIn)
		}
		standIn = standIn[4:]
		var got podView
		gotOK := scanPod(slices.Concat(raw[:from], standIn, raw[to:]), &got)
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("with the containers %s as %s the scan reads %v, %+v; the pod %v, %+v", raw[from:to], standIn, gotOK, got, wantOK, want)
		}
	}
	pods := variedPods(300, 3)
	for _, raw := range pods {
		from, to := containersIn(t, raw)
		check(raw, from, to, true)
	}
	from, to := containersIn(t, pods[0])
	for _, v := range []string{`null`, `[]`, `[null]`, `[{},null,{"a":[1,{"b":"]\"}"}]}]`, ` [ {} ,null ] `, "[\n{}\n]",
		`[1]`, `{}`, `[{} {}]`, `[{},]`, `[{}`, `"x"`, `[nul]`, `[{]`, `[{}] [`} {
		check(slices.Concat(pods[0][:from], []byte(v), pods[0][to:]), from, from+len(v), false)
	}
}

// containersIn is where the value of the pod's spec.containers is.
func containersIn(t *testing.T, raw []byte) (from, to int) {
	t.Helper()
	spec := jsonscan.Member(raw, "spec")
	v := jsonscan.Member(spec, "containers")
	if v == nil {
		t.Fatalf("no spec.containers in %s", raw)
	}
	from = cap(raw) - cap(v) // v is a part of raw
	return from, from + len(v)
}
