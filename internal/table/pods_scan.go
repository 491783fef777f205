package table

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scanPod fills v, a zero podView, from a pod's JSON as decode would, in
// one pass (scan.go) that reads the members the printer reads and passes
// over the rest without decoding it (an object or an array of them only
// to its end): a pod's row is rendered for every pod a question or the
// column warmer reads, and go-json-experiment's decoder spends most of a
// row on what the printer never reads (a container status's image and
// IDs, a condition's times and messages, the members it passes over a
// token at a time). false when the JSON is anything it does not read
// itself: not an object, a member the view reads given twice or as
// another type, a string it reads with an escape or a byte outside
// ASCII, a number outside its type, a syntax error in what it reads;
// decode then reads it, and v must be dropped. When true and the JSON is
// valid (an API server's always is), v is what sigs.k8s.io/json fills
// (FuzzScanPod, TestScanPodAsTheAPIServer).
func scanPod(raw []byte, v *podView) bool {
	s := scanner{b: raw}
	var seen uint8
	ok := s.object(func(s *scanner, name []byte) bool {
		switch string(name) {
		case "metadata":
			return once(&seen, 1) && s.orNull(func() bool { return scanPodMeta(s, v) })
		case "spec":
			return once(&seen, 2) && s.orNull(func() bool { return scanPodSpec(s, v) })
		case "status":
			return once(&seen, 4) && s.orNull(func() bool { return scanPodStatus(s, &v.Status) })
		}
		return s.skip()
	})
	return ok && s.end()
}

// once marks bit in *seen, false when it was marked: a member the view
// reads given twice (sigs.k8s.io/json merges them; decode decides).
func once[T uint8 | uint16](seen *T, bit T) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// orNull reads a null (what a struct is left as) or the value read reads.
func (s *scanner) orNull(read func() bool) bool {
	return s.null() || read()
}

// text reads a string member into *dst (null leaves it).
func (s *scanner) text(dst *string) bool {
	if s.null() {
		return true
	}
	b, ok := s.rawString(true)
	if ok {
		*dst = known(b)
	}
	return ok
}

// known is string(b), without a copy when b is one of the values every
// pod repeats (a phase, a condition's type and status, a container
// state's reason, a restart policy): most of the strings a row reads.
func known(b []byte) string {
	switch string(b) {
	case "True":
		return "True"
	case "False":
		return "False"
	case "Unknown":
		return "Unknown"
	case "Pending":
		return "Pending"
	case "Running":
		return "Running"
	case "Succeeded":
		return "Succeeded"
	case "Failed":
		return "Failed"
	case "PodReadyToStartContainers":
		return "PodReadyToStartContainers"
	case "Initialized":
		return "Initialized"
	case "Ready":
		return "Ready"
	case "ContainersReady":
		return "ContainersReady"
	case "PodScheduled":
		return "PodScheduled"
	case "DisruptionTarget":
		return "DisruptionTarget"
	case "PodCompleted":
		return "PodCompleted"
	case "ContainersNotReady":
		return "ContainersNotReady"
	case "Unschedulable":
		return "Unschedulable"
	case "SchedulingGated":
		return "SchedulingGated"
	case "Evicted":
		return "Evicted"
	case "ContainerCreating":
		return "ContainerCreating"
	case "PodInitializing":
		return "PodInitializing"
	case "CrashLoopBackOff":
		return "CrashLoopBackOff"
	case "ImagePullBackOff":
		return "ImagePullBackOff"
	case "ErrImagePull":
		return "ErrImagePull"
	case "Completed":
		return "Completed"
	case "Error":
		return "Error"
	case "OOMKilled":
		return "OOMKilled"
	case "Always":
		return "Always"
	}
	return string(b)
}

// int32 reads an integer member into *dst (null leaves it) as
// encoding/json does: a fraction or an exponent is refused.
func (s *scanner) int32(dst *int32) bool {
	if s.null() {
		return true
	}
	b, ok := s.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(string(b), 10, 32)
	*dst = int32(n)
	return err == nil
}

// bool reads true or false into *dst (null leaves it).
func (s *scanner) bool(dst *bool) bool {
	switch s.peek() {
	case 't':
		*dst = true
		return s.literal("true")
	case 'f':
		*dst = false
		return s.literal("false")
	}
	return s.null()
}

// time reads a metav1.Time as its UnmarshalJSON does.
func (s *scanner) time(dst *metav1.Time) bool {
	if s.null() {
		*dst = metav1.Time{}
		return true
	}
	b, ok := s.rawString(true)
	if !ok {
		return false
	}
	t, err := time.Parse(time.RFC3339, string(b))
	*dst = metav1.Time{Time: t.Local()}
	return err == nil
}

// ptr reads a pointer member: null is nil, anything else a new value
// that read reads.
func ptr[T any](s *scanner, dst **T, read func(v *T) bool) bool {
	if s.null() {
		*dst = nil
		return true
	}
	*dst = new(T)
	return read(*dst)
}

// timePtr reads a *metav1.Time: null is nil.
func (s *scanner) timePtr(dst **metav1.Time) bool { return ptr(s, dst, s.time) }

// list reads an array into *dst, each element with elem (null: nil; an
// empty array: empty, not nil, as both decoders leave it).
func list[T any](s *scanner, dst *[]T, elem func(s *scanner, e *T) bool) bool {
	if s.null() {
		*dst = nil
		return true
	}
	out := make([]T, 0, 4)
	ok := s.array(func(s *scanner) bool {
		out = append(out, *new(T))
		return elem(s, &out[len(out)-1])
	})
	*dst = out
	return ok
}

func scanPodMeta(s *scanner, v *podView) bool {
	var seen uint8
	return s.object(func(s *scanner, name []byte) bool {
		switch string(name) {
		case "name":
			return once(&seen, 1) && s.text(&v.Metadata.Name)
		case "creationTimestamp":
			return once(&seen, 2) && s.time(&v.Metadata.CreationTimestamp)
		case "deletionTimestamp":
			return once(&seen, 4) && s.timePtr(&v.Metadata.DeletionTimestamp)
		}
		return s.skip()
	})
}

func scanPodSpec(s *scanner, v *podView) bool {
	var seen uint8
	sp := &v.Spec
	return s.object(func(s *scanner, name []byte) bool {
		switch string(name) {
		case "containers":
			return once(&seen, 1) && scanContainers(s, &sp.Containers)
		case "initContainers":
			return once(&seen, 2) && list(s, &sp.InitContainers, func(s *scanner, e *struct {
				Name          string                         `json:"name"`
				RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy"`

				containerBulk
			}) bool {
				var seen uint8
				return s.orNull(func() bool {
					return s.object(func(s *scanner, name []byte) bool {
						switch string(name) {
						case "name":
							return once(&seen, 1) && s.text(&e.Name)
						case "restartPolicy":
							return once(&seen, 2) && ptr(s, &e.RestartPolicy, func(p *corev1.ContainerRestartPolicy) bool { return s.text((*string)(p)) })
						}
						return s.skip()
					})
				})
			})
		case "nodeName":
			return once(&seen, 4) && s.text(&sp.NodeName)
		case "readinessGates":
			return once(&seen, 8) && list(s, &sp.ReadinessGates, func(s *scanner, e *corev1.PodReadinessGate) bool {
				var seen uint8
				return s.orNull(func() bool {
					return s.object(func(s *scanner, name []byte) bool {
						if string(name) == "conditionType" {
							return once(&seen, 1) && s.text((*string)(&e.ConditionType))
						}
						return s.skip()
					})
				})
			})
		}
		return s.skip()
	})
}

// scanContainers reads a pod's spec.containers, of which the printer
// reads only the number: objects (or nulls) passed over.
func scanContainers(s *scanner, dst *[]anObject) bool {
	return list(s, dst, func(s *scanner, _ *anObject) bool {
		c := s.peek()
		return (c == '{' || c == 'n') && s.skip()
	})
}

// PodContainersStandIn appends to dst the shortest value that a pod's
// scan reads as it reads v, the value of the pod's spec.containers (an
// array of objects, of which the printer reads only their number): null
// for null, else an array of as many empty objects. ok is false when
// the scan would not read v itself (the pod is then scanned whole, and
// left to decode). A caller that holds the containers of many pods in
// shared pieces (the cache's chunks) reads them once per piece, and
// scans each pod's row with the stand-in in their place.
func PodContainersStandIn(dst, v []byte) (_ []byte, ok bool) {
	s := scanner{b: v}
	var cs []anObject
	if !scanContainers(&s, &cs) || !s.end() {
		return dst, false
	}
	if cs == nil {
		return append(dst, "null"...), true
	}
	dst = append(dst, '[')
	for i := range cs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, "{}"...)
	}
	return append(dst, ']'), true
}

func scanPodStatus(s *scanner, st *podStatusView) bool {
	var seen uint8
	return s.object(func(s *scanner, name []byte) bool {
		switch string(name) {
		case "phase":
			return once(&seen, 1) && s.text((*string)(&st.Phase))
		case "reason":
			return once(&seen, 2) && s.text(&st.Reason)
		case "conditions":
			return once(&seen, 4) && list(s, &st.Conditions, func(s *scanner, c *podCondition) bool {
				var seen uint8
				return s.orNull(func() bool {
					return s.object(func(s *scanner, name []byte) bool {
						switch string(name) {
						case "type":
							return once(&seen, 1) && s.text((*string)(&c.Type))
						case "status":
							return once(&seen, 2) && s.text((*string)(&c.Status))
						case "reason":
							return once(&seen, 4) && s.text(&c.Reason)
						}
						return s.skip()
					})
				})
			})
		case "initContainerStatuses":
			return once(&seen, 8) && list(s, &st.InitContainerStatuses, scanContainerStatus)
		case "containerStatuses":
			return once(&seen, 16) && list(s, &st.ContainerStatuses, scanContainerStatus)
		case "podIP":
			return once(&seen, 32) && s.text(&st.PodIP)
		case "podIPs":
			return once(&seen, 64) && list(s, &st.PodIPs, func(s *scanner, e *struct {
				IP string `json:"ip"`
			}) bool {
				var seen uint8
				return s.orNull(func() bool {
					return s.object(func(s *scanner, name []byte) bool {
						if string(name) == "ip" {
							return once(&seen, 1) && s.text(&e.IP)
						}
						return s.skip()
					})
				})
			})
		case "nominatedNodeName":
			return once(&seen, 128) && s.text(&st.NominatedNodeName)
		}
		return s.skip()
	})
}

func scanContainerStatus(s *scanner, c *containerStatusView) bool {
	var seen uint8
	return s.orNull(func() bool {
		return s.object(func(s *scanner, name []byte) bool {
			switch string(name) {
			case "name":
				return once(&seen, 1) && s.text(&c.Name)
			case "state":
				return once(&seen, 2) && scanContainerState(s, &c.State)
			case "lastState":
				return once(&seen, 4) && s.orNull(func() bool {
					var seen uint8
					return s.object(func(s *scanner, name []byte) bool {
						if string(name) != "terminated" {
							return s.skip()
						}
						var seenT uint8
						return once(&seen, 1) && ptr(s, &c.LastTerminationState.Terminated, func(t *struct {
							FinishedAt metav1.Time `json:"finishedAt"`
						}) bool {
							return s.object(func(s *scanner, name []byte) bool {
								if string(name) == "finishedAt" {
									return once(&seenT, 1) && s.time(&t.FinishedAt)
								}
								return s.skip()
							})
						})
					})
				})
			case "ready":
				return once(&seen, 8) && s.bool(&c.Ready)
			case "restartCount":
				return once(&seen, 16) && s.int32(&c.RestartCount)
			case "started":
				return once(&seen, 32) && ptr(s, &c.Started, s.bool)
			}
			return s.skip()
		})
	})
}

// scanContainerState reads a corev1.ContainerState whole, every member of
// its types included, as they decode.
func scanContainerState(s *scanner, st *corev1.ContainerState) bool {
	var seen uint8
	return s.orNull(func() bool {
		return s.object(func(s *scanner, name []byte) bool {
			switch string(name) {
			case "waiting":
				var seenW uint8
				return once(&seen, 1) && ptr(s, &st.Waiting, func(w *corev1.ContainerStateWaiting) bool {
					return s.object(func(s *scanner, name []byte) bool {
						switch string(name) {
						case "reason":
							return once(&seenW, 1) && s.text(&w.Reason)
						case "message":
							return once(&seenW, 2) && s.text(&w.Message)
						}
						return s.skip()
					})
				})
			case "running":
				var seenR uint8
				return once(&seen, 2) && ptr(s, &st.Running, func(r *corev1.ContainerStateRunning) bool {
					return s.object(func(s *scanner, name []byte) bool {
						if string(name) == "startedAt" {
							return once(&seenR, 1) && s.time(&r.StartedAt)
						}
						return s.skip()
					})
				})
			case "terminated":
				var seenT uint8
				return once(&seen, 4) && ptr(s, &st.Terminated, func(t *corev1.ContainerStateTerminated) bool {
					return s.object(func(s *scanner, name []byte) bool {
						switch string(name) {
						case "exitCode":
							return once(&seenT, 1) && s.int32(&t.ExitCode)
						case "signal":
							return once(&seenT, 2) && s.int32(&t.Signal)
						case "reason":
							return once(&seenT, 4) && s.text(&t.Reason)
						case "message":
							return once(&seenT, 8) && s.text(&t.Message)
						case "startedAt":
							return once(&seenT, 16) && s.time(&t.StartedAt)
						case "finishedAt":
							return once(&seenT, 32) && s.time(&t.FinishedAt)
						case "containerID":
							return once(&seenT, 64) && s.text(&t.ContainerID)
						}
						return s.skip()
					})
				})
			}
			return s.skip()
		})
	})
}
