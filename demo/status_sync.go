package demo

import (
	"bytes"
	"encoding/json"
)

// syncWorkloadStatus recomputes the status of a ReplicaSet and of its
// Deployment from the pods the ReplicaSet owns, as the controllers do, and
// stores each only when it changed. c.mu must be held.
func (c *Cluster) syncWorkloadStatus(rs *object) {
	rs = c.objects[ReplicaSets][rs.key()]
	if rs == nil {
		return
	}
	uid := rs.uid
	var total, ready int
	for _, p := range c.objects[Pods] {
		if p.namespace != rs.namespace || p.ownerUID != uid {
			continue
		}
		if p.deleting {
			continue
		}
		total++
		if p.fields["status.phase"] == "Running" {
			ready++
		}
	}
	gen := rs.get("metadata.generation").Int()
	c.putStatus(rs, map[string]any{
		"replicas": total, "fullyLabeledReplicas": total, "readyReplicas": ready,
		"availableReplicas": ready, "observedGeneration": gen,
	})
	depName := rs.ownerName
	dep := c.objects[Deployments][key{rs.namespace, depName}]
	if dep == nil {
		return
	}
	want := int(dep.get("spec.replicas").Int())
	available := "True"
	if ready < want {
		available = "False"
	}
	now := c.timestamp()
	c.putStatus(dep, map[string]any{
		"observedGeneration": dep.get("metadata.generation").Int(),
		"replicas":           total, "updatedReplicas": total, "readyReplicas": ready,
		"availableReplicas": ready, "unavailableReplicas": max(0, want-ready),
		"conditions": []any{
			map[string]any{"type": "Available", "status": available, "reason": "MinimumReplicasAvailable",
				"message": "Deployment has minimum availability.", "lastUpdateTime": now, "lastTransitionTime": now},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
				"message":        "ReplicaSet \"" + rs.name + "\" has successfully progressed.",
				"lastUpdateTime": now, "lastTransitionTime": now},
		},
	})
}

// putStatus stores o with a new status unless it is the same, ignoring
// condition timestamps. c.mu must be held.
func (c *Cluster) putStatus(o *object, status map[string]any) {
	m := o.decode()
	if sameStatus(m["status"], status) {
		return
	}
	m["status"] = status
	c.mustPut(o.res, m)
}

func sameStatus(a, b any) bool {
	strip := func(v any) []byte {
		m, ok := clone(v).(map[string]any)
		if !ok {
			return nil
		}
		for _, cond := range asList(m["conditions"]) {
			if cm, ok := cond.(map[string]any); ok {
				delete(cm, "lastUpdateTime")
				delete(cm, "lastTransitionTime")
			}
		}
		b, _ := json.Marshal(m)
		return b
	}
	return bytes.Equal(strip(a), strip(b))
}
