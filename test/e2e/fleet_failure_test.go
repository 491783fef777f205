package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// The fleet's freshness flags: short, so that a failed cluster turns stale
// quickly; the idle timeout well above a reconnect's time, so that a quiet
// healthy cluster's watches, closed and reopened on it, never look hung.
const (
	fleetStaleAfter = 3 * time.Second
	fleetIdle       = 8 * time.Second
)

// fleetAPI is one API server of the fleet under test.
type fleetAPI struct {
	name       string
	c          *cluster.Cluster
	cs         kubernetes.Interface
	api        *apiServer
	seeded     *cluster.Seeded
	kubeconfig string // how kubeindex reaches it
	px         *proxy // between kubeindex and the API server; nil if none
}

// fleetE2E is one kubeindex serving the fleet, its clusters listed in a
// configuration file it watches.
type fleetE2E struct {
	k       *kubeindex
	config  string
	members []*fleetAPI
}

// startFleet starts three API servers (east is the test binary's shared
// one; west and south are the test's own, to be killed and hung), seeds
// them, east and west with the same addresses, and one kubeindex over
// all three.
func startFleet(t *testing.T) *fleetE2E {
	t.Helper()
	east := newFleetAPI(t, "east", cluster.StartForTest(t), cluster.SeedOptions{})
	west := newFleetAPI(t, "west", cluster.StartPrivateForTest(t), cluster.SeedOptions{Namespaces: 1, IPBlock: east.seeded.IPBlock})
	south := newFleetAPI(t, "south", cluster.StartPrivateForTest(t), cluster.SeedOptions{Namespaces: 1})
	south.px = startProxy(t, strings.TrimPrefix(south.c.Host, "https://"))
	south.kubeconfig = south.px.kubeconfigVia(t, south.c.Kubeconfig)
	f := &fleetE2E{config: filepath.Join(t.TempDir(), "fleet.yaml"), members: []*fleetAPI{east, west, south}}
	f.writeConfig(t, f.members...)
	f.k = startKubeindex(t, "--config", f.config,
		"--stale-after", fleetStaleAfter.String(), "--watch-idle-timeout", fleetIdle.String())
	return f
}

func newFleetAPI(t *testing.T, name string, c *cluster.Cluster, seed cluster.SeedOptions) *fleetAPI {
	t.Helper()
	cs, dyn := c.Clients(t)
	return &fleetAPI{name: name, c: c, cs: cs, api: newAPIServer(t, c),
		seeded: cluster.SeedForTest(t, cs, dyn, seed), kubeconfig: c.Kubeconfig}
}

// writeConfig makes the configuration file list members, replacing it by
// a rename as editors do.
func (f *fleetE2E) writeConfig(t *testing.T, members ...*fleetAPI) {
	t.Helper()
	var b strings.Builder
	b.WriteString("resources:\n- resource: pods\n- resource: namespaces\n- resource: nodes\nclusters:\n")
	for _, m := range members {
		fmt.Fprintf(&b, "- name: %s\n  kubeconfig: %q\n", m.name, m.kubeconfig)
	}
	tmp := f.config + ".new"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.config); err != nil {
		t.Fatal(err)
	}
}

func (f *fleetE2E) member(name string) *fleetAPI {
	for _, m := range f.members {
		if m.name == name {
			return m
		}
	}
	panic("no fleet member " + name)
}

// others is every member but name.
func (f *fleetE2E) others(name string) []*fleetAPI {
	return slices.DeleteFunc(slices.Clone(f.members), func(m *fleetAPI) bool { return m.name == name })
}

func (f *fleetE2E) oracles() map[string]kubernetes.Interface { return oraclesOf(f.members) }

// oraclesOf is each member's client by its cluster's name.
func oraclesOf(members []*fleetAPI) map[string]kubernetes.Interface {
	out := map[string]kubernetes.Interface{}
	for _, m := range members {
		out[m.name] = m.cs
	}
	return out
}

// kubectl is kubectl against the member's API server and against
// kubeindex under the member's prefix.
func (f *fleetE2E) kubectl(t *testing.T, m *fleetAPI) kubectlPair {
	return kubectlPair{api: newKubectl(t, m.name+" API server", m.c.Kubeconfig),
		ki: newKubectl(t, "kubeindex "+m.name, kubeconfigFor(t, f.k.URL+"/clusters/"+m.name+k8sPrefix))}
}

func (f *fleetE2E) apiKubectls(t *testing.T) map[string]*kubectlCmd {
	out := map[string]*kubectlCmd{}
	for _, m := range f.members {
		out[m.name] = newKubectl(t, m.name+" API server", m.c.Kubeconfig)
	}
	return out
}

// westKilled: west's API server dies (SIGKILL). East and south answer,
// stream and respond as before; west is stale, saying the connection is
// refused, in /api/v1/clusters, the lists' slots and /readyz, and is
// synced again once its API server is back. A kubeindex started while it
// is down has it failed, per --fleet-ready.
func (f *fleetE2E) westKilled(t *testing.T) {
	west := f.member("west")
	healthy := f.others("west")
	streams := f.openStreams(t, healthy)
	before := f.latencies(t, healthy)
	if err := west.c.Kill(); err != nil {
		t.Fatal(err)
	}
	f.failed(t, west, regexp.MustCompile(`connection refused`))
	f.unaffected(t, healthy, streams, "killed")
	logLatencies(t, "west killed", before, f.latencies(t, healthy))
	f.startedWithout(t, west, regexp.MustCompile(`connection refused`))

	ctx, cancel := context.WithTimeout(context.Background(), cluster.DefaultStartTimeout)
	defer cancel()
	if err := west.c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	f.recovered(t, west)
}

// southHung: south's connection carries nothing while staying open. East
// and west are unaffected; south is stale with the hung connection's
// reason, and synced again once bytes flow. With authorization on
// (fleet_authz_test.go), answers across clusters keep east's and west's
// parts, south's slot saying why, both before and once south is stale.
func (f *fleetE2E) southHung(t *testing.T) {
	south := f.member("south")
	healthy := f.others("south")
	streams := f.openStreams(t, healthy)
	authz := f.startAuthorized(t)
	before := f.latencies(t, healthy)
	south.px.setHung(true)
	authz.whileHung(t, f, "south", "ben", false, "just hung")
	f.failed(t, south, regexp.MustCompile(`hung|no answer for`))
	authz.waitState(t, "south", "stale")
	authz.whileHung(t, f, "south", "cat", false, "stale")
	authz.whileHung(t, f, "south", "ann", true, "stale")
	f.unaffected(t, healthy, streams, "hung")
	logLatencies(t, "south hung", before, f.latencies(t, healthy))
	south.px.setHung(false)
	f.recovered(t, south)
}

// openStreams opens a pod stream under each member's prefix and waits
// until each holds its API server's pods.
func (f *fleetE2E) openStreams(t *testing.T, members []*fleetAPI) map[string]*sseView {
	t.Helper()
	streams := map[string]*sseView{}
	for _, m := range members {
		streams[m.name] = subscribeSSE(t, f.k, "/clusters/"+m.name+"/api/v1/pods?watch=true")
	}
	f.streamsFollow(t, members, streams, "the streams' snapshots")
	return streams
}

// streamsFollow waits until each member's stream holds exactly its API
// server's pods, every change applied once and none missing.
func (f *fleetE2E) streamsFollow(t *testing.T, members []*fleetAPI, streams map[string]*sseView, what string) {
	t.Helper()
	for _, m := range members {
		eventually(t, converge, what+" in "+m.name, func() error {
			want, err := m.api.list(t.Context(), podsR, "", nil)
			if err != nil {
				return err
			}
			return streams[m.name].matches(want)
		})
	}
}

// churn creates two pods in each member, relabels one and deletes the
// other: the changes its stream must carry.
func churn(t *testing.T, members []*fleetAPI, tag string) {
	t.Helper()
	ctx := t.Context()
	for _, m := range members {
		ns := m.seeded.Namespaces[0]
		pods := m.cs.CoreV1().Pods(ns)
		kept, gone := "fleet-"+tag+"-kept", "fleet-"+tag+"-gone"
		for _, name := range []string{kept, gone} {
			if _, err := pods.Create(ctx, probePod(ns, name, map[string]string{"app": "probe"}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := pods.Patch(ctx, kept, types.MergePatchType, []byte(`{"metadata":{"labels":{"fleet":"`+tag+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pods.Delete(ctx, gone, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	}
}

// failed waits until m is stale with a reason matching why, in
// /api/v1/clusters and /readyz (ready: the fleet's default readiness
// counts a stale cluster, answering from memory, as ready), and checks
// its slot in a list across clusters.
func (f *fleetE2E) failed(t *testing.T, m *fleetAPI, why *regexp.Regexp) {
	t.Helper()
	began := time.Now()
	eventually(t, fleetIdle+readyTimeout, m.name+" stale with its reason", func() error {
		state, reason, err := f.k.clusterState(m.name)
		if err != nil {
			return err
		}
		if state != "stale" || !why.MatchString(reason) {
			return fmt.Errorf("%s: %s (%s); expect stale, the reason matching %s", m.name, state, reason, why)
		}
		return nil
	})
	state, reason, _ := f.k.clusterState(m.name)
	t.Logf("%s %s %v after the failure: %s", m.name, state, time.Since(began).Round(time.Millisecond), reason)

	eventually(t, converge, "/readyz saying "+m.name+" is stale", func() error {
		r, err := f.k.try("/readyz")
		if err != nil {
			return err
		}
		var body struct {
			Ready, Stale bool
			Clusters     []struct{ Name, State, Reason string }
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			return fmt.Errorf("/readyz: %w: %s", err, r.body)
		}
		i := slices.IndexFunc(body.Clusters, func(c struct{ Name, State, Reason string }) bool { return c.Name == m.name })
		if r.code != http.StatusOK || !body.Ready || !body.Stale || i < 0 ||
			body.Clusters[i].State != "stale" || !why.MatchString(body.Clusters[i].Reason) {
			return fmt.Errorf("/readyz: %d %s", r.code, r.body)
		}
		return nil
	})
	// Answers from memory, marked stale: under its prefix, and its slot
	// in a list across clusters.
	p := m.seeded.Pods[0]
	path := "/clusters/" + m.name + podsR.kiPath(p.Namespace, p.Name)
	// (Each resource turns stale on its own: pods may follow the first
	// stale resource by a moment.)
	eventually(t, converge, "a pod of "+m.name+" from memory, marked stale", func() error {
		if r := f.k.get(t, path); r.code != http.StatusOK || r.header.Get("X-Kubeindex-Stale") != "true" {
			return fmt.Errorf("GET %s: %d, stale %q; expect 200 from memory, stale true", path, r.code, r.header.Get("X-Kubeindex-Stale"))
		}
		return nil
	})
	eventually(t, converge, m.name+"'s slot in a list across clusters", func() error {
		var page struct{ Clusters []fleetSlot }
		if err := f.k.getJSON("/api/v1/pods?limit=1", &page); err != nil {
			return err
		}
		for _, s := range page.Clusters {
			want := fleetSlot{Cluster: s.Cluster, Status: 200, State: "synced"}
			if s.Cluster == m.name {
				want.State = "stale"
			}
			if s != want {
				return fmt.Errorf("slots %+v; expect %s stale, the others synced, each 200", page.Clusters, m.name)
			}
		}
		if len(page.Clusters) != len(f.members) {
			return fmt.Errorf("slots %+v; expect one per cluster", page.Clusters)
		}
		return nil
	})
}

// unaffected: while another cluster has failed, each healthy member is
// synced, its stream opened before the failure carries every change made
// in its cluster meanwhile, and kubectl under its prefix prints what its
// API server prints.
func (f *fleetE2E) unaffected(t *testing.T, healthy []*fleetAPI, streams map[string]*sseView, tag string) {
	t.Helper()
	for _, m := range healthy {
		eventually(t, converge, m.name+" synced", func() error {
			if state, reason, err := f.k.clusterState(m.name); err != nil || state != "synced" {
				return fmt.Errorf("%s: %s (%s) %v", m.name, state, reason, err)
			}
			return nil
		})
	}
	churn(t, healthy, tag)
	f.streamsFollow(t, healthy, streams, "the changes made during the failure")
	for _, m := range healthy {
		f.kubectl(t, m).same(t, tableCells, "get", "pods", "-A", "-o", "wide")
	}
}

// recovered waits until m is synced again and answers as its API server.
func (f *fleetE2E) recovered(t *testing.T, m *fleetAPI) {
	t.Helper()
	began := time.Now()
	eventually(t, readyTimeout, m.name+" synced again", func() error {
		if state, reason, err := f.k.clusterState(m.name); err != nil || state != "synced" {
			return fmt.Errorf("%s: %s (%s) %v", m.name, state, reason, err)
		}
		return nil
	})
	t.Logf("%s synced %v after its API server could be reached again", m.name, time.Since(began).Round(time.Millisecond))
	f.kubectl(t, m).same(t, tableCells, "get", "pods", "-A", "-o", "wide")
}

// latencySamples is how many requests of each kind latencies times.
const latencySamples = 100

// latencies times by-key and by-IP requests under each member's prefix,
// and by-IP across clusters, one after another: p50 and p99 per cluster
// and kind. Logged, never asserted: the machine's load is in them as much
// as kubeindex.
func (f *fleetE2E) latencies(t *testing.T, members []*fleetAPI) map[string][2]time.Duration {
	t.Helper()
	paths := map[string]string{}
	for _, m := range members {
		p := m.seeded.Pods[0]
		paths[m.name+" by-key"] = "/clusters/" + m.name + podsR.kiPath(p.Namespace, p.Name)
		paths[m.name+" by-IP"] = "/clusters/" + m.name + "/api/v1/ip/" + p.Status.PodIP
	}
	// Across clusters, the failed one included: east's and west's address.
	paths["fleet by-IP"] = "/api/v1/clusters/ip/" + f.member("east").seeded.Pods[0].Status.PodIP
	out := map[string][2]time.Duration{}
	for kind, path := range paths {
		took := make([]time.Duration, 0, latencySamples)
		for range latencySamples {
			began := time.Now()
			r := f.k.get(t, path)
			took = append(took, time.Since(began))
			if r.code != http.StatusOK {
				t.Fatalf("GET %s: %d %.200s", path, r.code, r.body)
			}
		}
		slices.Sort(took)
		out[kind] = [2]time.Duration{took[len(took)/2], took[len(took)*99/100]}
	}
	return out
}

func logLatencies(t *testing.T, failure string, before, during map[string][2]time.Duration) {
	t.Helper()
	keys := make([]string, 0, len(before))
	for k := range before {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "latency of the healthy clusters, %d sequential requests each, before | while %s (p50 p99):", latencySamples, failure)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-14s %9v %9v | %9v %9v", k, before[k][0].Round(time.Microsecond), before[k][1].Round(time.Microsecond),
			during[k][0].Round(time.Microsecond), during[k][1].Round(time.Microsecond))
	}
	t.Log(b.String())
}

// startedWithout starts kubeindexes over the fleet while down's API server
// is down, once per --fleet-ready: down, never reached, is failed with a
// reason matching why, and its slot in a list across clusters is a 503
// saying so, while the others sync and serve; /readyz is 503 with
// --fleet-ready=all (the default) and 200 with --fleet-ready=any.
func (f *fleetE2E) startedWithout(t *testing.T, down *fleetAPI, why *regexp.Regexp) {
	t.Helper()
	args := []string{"--resources", "pods,namespaces,nodes", "--stale-after", fleetStaleAfter.String()}
	for _, m := range f.members {
		args = append(args, "--cluster", "name="+m.name+",kubeconfig="+m.kubeconfig)
	}
	for ready, code := range map[string]int{"all": http.StatusServiceUnavailable, "any": http.StatusOK} {
		k := launchKubeindex(t, append(args, "--fleet-ready", ready)...)
		eventually(t, readyTimeout, "--fleet-ready="+ready+": "+down.name+" failed, the others synced", func() error {
			var page struct{ Clusters []fleetSlot }
			if err := k.getJSON("/api/v1/pods?limit=1", &page); err != nil {
				return err
			}
			for _, s := range page.Clusters {
				if s.Cluster == down.name && (s.Status != http.StatusServiceUnavailable || !why.MatchString(s.Reason)) ||
					s.Cluster != down.name && (s.Status != http.StatusOK || s.State != "synced") {
					return fmt.Errorf("slots %+v", page.Clusters)
				}
			}
			if state, reason, err := k.clusterState(down.name); err != nil || state != "failed" || !why.MatchString(reason) {
				return fmt.Errorf("%s: %s (%s) %v; expect failed, the reason matching %s", down.name, state, reason, err, why)
			}
			if r, err := k.try("/readyz"); err != nil || r.code != code {
				return fmt.Errorf("/readyz: %v %d %s; expect %d", err, r.code, r.body, code)
			}
			return nil
		})
		k.stop(t)
	}
}
