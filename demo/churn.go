package demo

import (
	"context"
	"fmt"
	"time"
)

// Run makes one churn Step every ChurnInterval until ctx is done. It
// blocks; it is the only goroutine the package starts on its own behalf.
func (c *Cluster) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.ChurnInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Step()
		}
	}
}

// Step makes one random (seeded) change of the kind a live cluster sees:
// a deployment scaled (a pod created Pending, or one marked terminating),
// a Pending pod started and given an IP, a terminating pod deleted, a
// container restart, a label or annotation change, a Job pod run,
// completed or removed once completed, a node heartbeat. Each change is
// one or more events. Churn touches only generated objects (those with
// SimulatedAnnotation), never what Apply created. IPs stay unique among
// pods that are not hostNetwork and not completed.
func (c *Cluster) Step() {
	c.mu.Lock()
	defer c.mu.Unlock()
	actions := []struct {
		weight int
		do     func() bool
	}{
		{3, c.scaleDeployment},
		{4, c.startPendingPod},
		{4, c.finishTerminatingPod},
		{1, c.restartContainer},
		{3, c.touchPod},
		{1, c.runJob},
		{2, c.completeJob},
		{1, c.removeCompletedPod},
		{1, c.heartbeatNode},
	}
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	n := c.rng.IntN(total)
	for _, a := range actions {
		if n -= a.weight; n < 0 {
			if !a.do() && !c.touchPod() {
				c.heartbeatNode()
			}
			return
		}
	}
}

// candidates returns the generated objects of resource that pass keep,
// in list order. c.mu must be held.
func (c *Cluster) candidates(resource string, keep func(*object) bool) []*object {
	var out []*object
	for _, o := range c.sorted(c.objects[resource]) {
		if o.simulated && keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// pick returns a random element of objs, or nil. c.mu must be held.
func (c *Cluster) pick(objs []*object) *object {
	if len(objs) == 0 {
		return nil
	}
	return objs[c.rng.IntN(len(objs))]
}

func terminating(o *object) bool { return o.deleting }

func (c *Cluster) ownerReplicaSet(pod *object) *object {
	if pod.ownerKind != "ReplicaSet" {
		return nil
	}
	return c.objects[ReplicaSets][key{pod.namespace, pod.ownerName}]
}

func (c *Cluster) scaleDeployment() bool {
	dep := c.pick(c.candidates(Deployments, func(*object) bool { return true }))
	if dep == nil {
		return false
	}
	uid := dep.uid
	rs := c.pick(c.candidates(ReplicaSets, func(o *object) bool {
		return o.namespace == dep.namespace && o.ownerUID == uid
	}))
	if rs == nil {
		return false
	}
	replicas := int(dep.get("spec.replicas").Int())
	switch {
	case replicas <= 1:
		replicas++
	case replicas >= 6:
		replicas--
	default:
		replicas += 2*c.rng.IntN(2) - 1
	}
	for _, o := range []*object{dep, rs} {
		m := o.decode()
		nested(m, "spec")["replicas"] = replicas
		nested(m, "metadata")["generation"] = o.get("metadata.generation").Int() + 1
		if o == rs {
			nested(m, "metadata", "annotations")["deployment.kubernetes.io/desired-replicas"] = fmt.Sprint(replicas)
		}
		c.mustPut(o.res, m)
	}
	live := c.candidates(Pods, func(p *object) bool {
		return p.namespace == rs.namespace && p.ownerUID == rs.uid && !terminating(p)
	})
	switch {
	case len(live) < replicas:
		tmpl := nested(rs.decode(), "spec", "template")
		c.mustPut(mustResource(Pods), c.replicaPod(rs, tmpl, c.pickNode()))
	case len(live) > replicas:
		m := c.pick(live).decode()
		md := nested(m, "metadata")
		md["deletionTimestamp"] = c.opts.Now().Add(30 * time.Second).UTC().Format(time.RFC3339)
		md["deletionGracePeriodSeconds"] = 30
		c.mustPut(mustResource(Pods), m)
	}
	c.syncWorkloadStatus(rs)
	return true
}

func (c *Cluster) startPendingPod() bool {
	pod := c.pick(c.candidates(Pods, func(p *object) bool {
		return p.fields["status.phase"] == "Pending" && !terminating(p)
	}))
	if pod == nil {
		return false
	}
	c.startPod(pod)
	if rs := c.ownerReplicaSet(pod); rs != nil {
		c.syncWorkloadStatus(rs)
	}
	return true
}

func (c *Cluster) finishTerminatingPod() bool {
	pod := c.pick(c.candidates(Pods, terminating))
	if pod == nil {
		return false
	}
	rs := c.ownerReplicaSet(pod)
	if err := c.remove(pod.res, pod.key()); err != nil {
		return false
	}
	if rs != nil {
		c.syncWorkloadStatus(rs)
	}
	return true
}

func (c *Cluster) restartContainer() bool {
	pod := c.pick(c.candidates(Pods, func(p *object) bool {
		return p.fields["status.phase"] == "Running" && p.fields["spec.restartPolicy"] == "Always"
	}))
	if pod == nil {
		return false
	}
	m := pod.decode()
	statuses := asList(nested(m, "status")["containerStatuses"])
	if len(statuses) == 0 {
		return false
	}
	cs := statuses[0].(map[string]any)
	now := c.timestamp()
	reason := []string{"Error", "OOMKilled"}[c.rng.IntN(2)]
	cs["lastState"] = map[string]any{"terminated": map[string]any{
		"exitCode": map[string]int{"Error": 1, "OOMKilled": 137}[reason], "reason": reason,
		"startedAt": now, "finishedAt": now, "containerID": cs["containerID"],
	}}
	cs["restartCount"] = pod.get("status.containerStatuses.0.restartCount").Int() + 1
	cs["containerID"] = "containerd://" + c.hexString(64)
	cs["state"] = map[string]any{"running": map[string]any{"startedAt": now}}
	c.mustPut(pod.res, m)
	return true
}

// touchPod toggles a pod's "canary" label (so label-selected watches see
// objects enter and leave) or bumps an annotation.
func (c *Cluster) touchPod() bool {
	pod := c.pick(c.candidates(Pods, func(p *object) bool { return !terminating(p) }))
	if pod == nil {
		return false
	}
	m := pod.decode()
	md := nested(m, "metadata")
	if c.rng.IntN(2) == 0 {
		labels := nested(md, "labels")
		if _, ok := labels["canary"]; ok {
			delete(labels, "canary")
		} else {
			labels["canary"] = "true"
		}
	} else {
		ann := nested(md, "annotations")
		n := pod.get(`metadata.annotations.demo\.kubeindex\.dev/touched`).Int()
		ann["demo.kubeindex.dev/touched"] = fmt.Sprint(n + 1)
	}
	c.mustPut(pod.res, m)
	return true
}

func (c *Cluster) runJob() bool {
	nss := c.appNamespaces()
	if len(nss) == 0 || len(c.sim.nodes) == 0 {
		return false
	}
	c.sim.jobs++
	base := fmt.Sprintf("report-%d", 29000000+c.sim.jobs)
	c.mustPut(mustResource(Pods), c.newJobPod(nss[c.rng.IntN(len(nss))], base, c.pickNode()))
	return true
}

func (c *Cluster) completeJob() bool {
	pod := c.pick(c.candidates(Pods, func(p *object) bool {
		return p.fields["status.phase"] == "Running" && p.ownerKind == "Job"
	}))
	if pod == nil {
		return false
	}
	n, ok := c.nodeByName(pod.fields["spec.nodeName"])
	if !ok {
		return false
	}
	m := pod.decode()
	c.setPodPhase(m, "Succeeded", n, podIPs(pod))
	c.mustPut(pod.res, m)
	return true
}

func (c *Cluster) removeCompletedPod() bool {
	pod := c.pick(c.candidates(Pods, func(p *object) bool {
		return p.fields["status.phase"] == "Succeeded" && p.key() != c.sim.keep
	}))
	return pod != nil && c.remove(pod.res, pod.key()) == nil
}

func (c *Cluster) heartbeatNode() bool {
	n := c.pick(c.candidates(Nodes, func(*object) bool { return true }))
	if n == nil {
		return false
	}
	m := n.decode()
	now := c.timestamp()
	for _, cond := range asList(nested(m, "status")["conditions"]) {
		cond.(map[string]any)["lastHeartbeatTime"] = now
	}
	ann := nested(m, "metadata", "annotations")
	ann["demo.kubeindex.dev/heartbeats"] = fmt.Sprint(n.get(`metadata.annotations.demo\.kubeindex\.dev/heartbeats`).Int() + 1)
	c.mustPut(n.res, m)
	return true
}

// podIPs returns status.podIPs of a pod.
func podIPs(pod *object) []string {
	var ips []string
	for _, v := range pod.get("status.podIPs.#.ip").Array() {
		ips = append(ips, v.Str)
	}
	return ips
}
