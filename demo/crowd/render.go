package crowd

import (
	"fmt"
	"strconv"
	"time"
)

// simulated is the annotation every generated object carries (the
// scenario's SimulatedAnnotation).
const simulated = "kubeindex.dev/simulated"

// state is what a pod is doing, as kubectl's STATUS column shows it.
type state uint8

const (
	running   state = iota // Running, ready
	notReady               // Running, the app's readiness probe failing
	pending                // Pending: containers being created, no address yet
	crashLoop              // Running phase, the app waiting in CrashLoopBackOff
	evicted                // Failed, reason Evicted
)

// member is one pod of the crowd.
type member struct {
	ns, app, node int32
	state         state
	restarts      int32
	name, uid     string
	seed          uint64    // container IDs and image digests
	created       time.Time // metadata.creationTimestamp
	changed       time.Time // the last state change: container start, restart, eviction
}

type app struct {
	name, image, tier string
	port              int
}

var apps = []app{
	{"storefront", "ghcr.io/kubeindex-demo/storefront:4.2.0", "frontend", 8080},
	{"api", "ghcr.io/kubeindex-demo/api:2.14.0", "backend", 8080},
	{"worker", "ghcr.io/kubeindex-demo/worker:2.14.0", "backend", 8080},
	{"cache", "redis:7.4.1", "data", 6379},
	{"gateway", "envoyproxy/envoy:v1.32.3", "frontend", 8080},
	{"indexer", "ghcr.io/kubeindex-demo/indexer:1.1.3", "backend", 8080},
	{"ledger", "ghcr.io/kubeindex-demo/ledger:3.0.1", "backend", 8080},
	{"mailer", "ghcr.io/kubeindex-demo/mailer:0.7.2", "backend", 8080},
	{"scorer", "ghcr.io/kubeindex-demo/scorer:5.3.0", "backend", 9000},
	{"web", "nginx:1.27.3", "frontend", 80},
}

// teams name the crowd's namespaces (team-01, team-02, … once they run
// out); none is a namespace the scenario makes.
var teams = []string{"checkout", "billing", "ads", "ml", "video", "maps", "chat", "risk", "ledger", "mail"}

// ip is slot i's address in 10.128.0.0/9.
func ip(i int) string {
	n := i + 1
	return fmt.Sprintf("10.%d.%d.%d", 128+n>>16, n>>8&255, n&255)
}

// render writes the stored JSON of m, the pod in slot i, at resourceVersion
// rv: what a kubelet and the admission chain would have made of it. It
// only reads m.
func (c *Crowd) render(m *member, i int, rv uint64) []byte {
	a := apps[m.app]
	ns := c.namespaces[m.ns]
	node := c.nodes[m.node]
	created, changed := ts(m.created), ts(m.changed)
	hash := c.hashes[int(m.ns)*len(apps)+int(m.app)]
	b := make([]byte, 0, 3072)
	w := func(parts ...string) {
		for _, p := range parts {
			b = append(b, p...)
		}
	}
	q := strconv.Quote
	w(`{"metadata":{"name":`, q(m.name), `,"generateName":`, q(a.name+"-"+hash+"-"), `,"namespace":`, q(ns),
		`,"uid":`, q(m.uid), `,"resourceVersion":"`, strconv.FormatUint(rv, 10), `","creationTimestamp":"`, created,
		`","labels":{"app":`, q(a.name), `,"pod-template-hash":"`, hash, `","tier":"`, a.tier, `"}`,
		`,"annotations":{"`, simulated, `":"true","prometheus.io/port":"9090","prometheus.io/scrape":"true"}},`)
	w(`"spec":{"containers":[{"name":`, q(a.name), `,"image":`, q(a.image),
		`,"ports":[{"name":"http","containerPort":`, strconv.Itoa(a.port), `,"protocol":"TCP"},{"name":"metrics","containerPort":9090,"protocol":"TCP"}]`,
		`,"env":[{"name":"LOG_LEVEL","value":"info"},{"name":"POD_IP","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"status.podIP"}}}]`,
		`,"resources":{"limits":{"memory":"256Mi"},"requests":{"cpu":"100m","memory":"128Mi"}}`,
		`,"readinessProbe":{"httpGet":{"path":"/healthz","port":"http","scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3}`,
		`,"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"},`,
		`{"name":"log-shipper","image":"cr.fluentbit.io/fluent/fluent-bit:3.2.4","resources":{"requests":{"cpu":"10m","memory":"32Mi"}}`,
		`,"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}]`,
		`,"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default"`,
		`,"nodeName":`, q(node.Name), `,"schedulerName":"default-scheduler","enableServiceLinks":true,"priority":0,"preemptionPolicy":"PreemptLowerPriority"`,
		`,"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},`,
		`{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},`)

	phase, ready, started := "Running", "True", "True"
	switch m.state {
	case pending:
		phase, ready, started = "Pending", "False", "False"
	case notReady, crashLoop:
		ready = "False"
	case evicted:
		phase, ready, started = "Failed", "False", "False"
	}
	w(`"status":{"phase":"`, phase, `"`)
	if m.state == evicted {
		w(`,"reason":"Evicted","message":"The node was low on resource: memory. Threshold quantity: 100Mi, available: 91Mi. Container `,
			a.name, ` was using 241Mi, request is 128Mi, has larger consumption of memory. "`)
	}
	cond := func(typ, status, reason string, at string) {
		w(`{"type":"`, typ, `","status":"`, status, `","lastProbeTime":null,"lastTransitionTime":"`, at, `"`)
		if reason != "" {
			w(`,"reason":"`, reason, `"`)
		}
		w(`}`)
	}
	notReadyReason := ""
	if ready == "False" {
		notReadyReason = "ContainersNotReady"
		if m.state == evicted {
			notReadyReason = "PodFailed"
		}
	}
	w(`,"conditions":[`)
	cond("PodReadyToStartContainers", started, "", created)
	w(`,`)
	cond("Initialized", "True", "", created)
	w(`,`)
	cond("Ready", ready, notReadyReason, changed)
	w(`,`)
	cond("ContainersReady", ready, notReadyReason, changed)
	w(`,`)
	cond("PodScheduled", "True", "", created)
	w(`],"hostIP":"`, node.IP, `","hostIPs":[{"ip":"`, node.IP, `"}]`)
	if m.state != pending {
		w(`,"podIP":"`, ip(i), `","podIPs":[{"ip":"`, ip(i), `"}]`)
	}
	w(`,"startTime":"`, created, `","containerStatuses":[`)
	c.renderContainer(w, m, a.name, a.image, true)
	w(`,`)
	c.renderContainer(w, m, "log-shipper", "cr.fluentbit.io/fluent/fluent-bit:3.2.4", false)
	w(`],"qosClass":"Burstable"}}`)
	return b
}

// renderContainer writes one container's status; the app container is the
// one that restarts, crash-loops and fails its readiness probe.
func (c *Crowd) renderContainer(w func(...string), m *member, name, image string, main bool) {
	created, changed := ts(m.created), ts(m.changed)
	restarts := int32(0)
	if main {
		restarts = m.restarts
	}
	id := fmt.Sprintf("%016x%016x%016x%016x", m.seed, m.seed^0x9e3779b97f4a7c15, uint64(restarts), boolBits(main))
	w(`{"name":"`, name, `","state":{`)
	ready, started := "true", "true"
	switch {
	case m.state == pending:
		w(`"waiting":{"reason":"ContainerCreating"}`)
		ready, started = "false", "false"
	case m.state == evicted:
		w(`"terminated":{"exitCode":137,"reason":"Error","startedAt":"`, created, `","finishedAt":"`, changed, `","containerID":"containerd://`, id, `"}`)
		ready, started = "false", "false"
	case main && m.state == crashLoop:
		w(`"waiting":{"reason":"CrashLoopBackOff","message":"back-off 5m0s restarting failed container=`, name, `"}`)
		ready, started = "false", "false"
	default:
		at := created
		if main && restarts > 0 {
			at = changed
		}
		w(`"running":{"startedAt":"`, at, `"}`)
		if main && m.state == notReady {
			ready = "false"
		}
	}
	w(`},"lastState":{`)
	if restarts > 0 {
		w(`"terminated":{"exitCode":1,"reason":"Error","startedAt":"`, created, `","finishedAt":"`, changed, `"}`)
	}
	w(`},"ready":`, ready, `,"restartCount":`, strconv.Itoa(int(restarts)), `,"image":"`, image, `"`)
	if m.state != pending {
		w(`,"imageID":"`, image, `@sha256:`, id, `","containerID":"containerd://`, id, `"`)
	} else {
		w(`,"imageID":""`)
	}
	w(`,"started":`, started, `}`)
}

func boolBits(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// ts formats a time as the API server does.
func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }
