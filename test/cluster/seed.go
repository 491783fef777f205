package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// SeedLabel is set on every object Seed creates, to the seed's Prefix, so a
// test can select exactly its own objects.
const SeedLabel = "kubeindex.test/seed"

// SeedOptions says what Seed creates. The zero value gives a small, varied
// cluster (2 namespaces, 3 nodes, 19 pods, 6 widgets).
type SeedOptions struct {
	// Prefix starts the name of every namespace and node created, and is the
	// value of SeedLabel. Seeds sharing a cluster need different prefixes.
	// Default "seed".
	Prefix string
	// Namespaces to create, each with Deployments "web" (IPv4 pods) and
	// "api" (dual-stack pods), their ReplicaSets, pods and Services, and
	// widgets. Default 2.
	Namespaces int
	// Nodes to create; pods are spread over them. Default 3.
	Nodes int
	// Replicas is the pod count of each Deployment. Default 3.
	Replicas int
	// Widgets per namespace (custom resources of WidgetGVR). Default 3.
	Widgets int
	// IPBlock picks the addresses used, from 1 to MaxIPBlocks, so seeds
	// sharing a cluster never share an IP. Default: the next block not yet
	// used by this process.
	IPBlock int
}

// Seeded is what Seed created, as the API server returned it (pods after
// their status update).
type Seeded struct {
	Prefix string
	// IPBlock is the block the addresses came from: another cluster seeded
	// with the same IPBlock gets the same pod addresses (overlapping pod
	// CIDRs).
	IPBlock int
	// Namespaces holds the workload namespaces; SystemNamespace holds the
	// DaemonSets' host-network pods.
	Namespaces      []string
	SystemNamespace string

	Nodes       []*corev1.Node
	Deployments []*appsv1.Deployment
	ReplicaSets []*appsv1.ReplicaSet
	DaemonSets  []*appsv1.DaemonSet
	Jobs        []*batchv1.Job
	Services    []*corev1.Service
	Pods        []*corev1.Pod
	Widgets     []*unstructured.Unstructured

	// ReusedIP is held by a Succeeded pod (of the Job) and a Running pod
	// (of the first "web" Deployment): IP reuse.
	ReusedIP string
	// NodeIPs maps each node to its InternalIP, which its host-network pods
	// (two per node) also report as their pod IP.
	NodeIPs map[string]string
}

// PodsByIP maps every IP in the pods' status.podIPs to the pods that report
// it: one pod for most IPs, several for node IPs and for ReusedIP.
func (s *Seeded) PodsByIP() map[string][]*corev1.Pod {
	m := map[string][]*corev1.Pod{}
	for _, p := range s.Pods {
		for _, ip := range p.Status.PodIPs {
			m[ip.IP] = append(m[ip.IP], p)
		}
	}
	return m
}

// MaxIPBlocks is how many seeds with distinct addresses a cluster can hold:
// each block holds ipBlockSize pod addresses of 198.18.0.0/16 and
// 198.19.block.0/24 for its nodes.
const MaxIPBlocks = 31

// ipBlockSize is how many pod addresses one block holds.
const ipBlockSize = 1 << 11

var lastIPBlock atomic.Int32

func (o SeedOptions) withDefaults() (SeedOptions, error) {
	if o.Prefix == "" {
		o.Prefix = "seed"
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Namespaces, 2)
	def(&o.Nodes, 3)
	def(&o.Replicas, 3)
	def(&o.Widgets, 3)
	if o.IPBlock == 0 {
		o.IPBlock = int(lastIPBlock.Add(1))
	}
	switch {
	case o.IPBlock < 1 || o.IPBlock > MaxIPBlocks:
		return o, fmt.Errorf("seed: IPBlock %d: want 1..%d", o.IPBlock, MaxIPBlocks)
	case o.Nodes > 250:
		return o, fmt.Errorf("seed: %d nodes: at most 250", o.Nodes)
	case o.Namespaces*2*o.Replicas >= ipBlockSize/2:
		return o, fmt.Errorf("seed: %d pods: at most %d per seed", o.Namespaces*2*o.Replicas, ipBlockSize/2-1)
	}
	return o, nil
}

// Addresses come from ranges reserved for benchmarking (198.18.0.0/15) and
// documentation (2001:db8::/32): stored in objects only, never routed, and
// never anything real's address.
var (
	podV4Base  = netip.MustParseAddr("198.18.0.0")
	nodeV4Base = netip.MustParseAddr("198.19.0.0")
	podV6Base  = netip.MustParseAddr("2001:db8::")
)

// addrAdd returns base + n (added to the low 64 bits; callers keep n small
// enough to stay inside base's range).
func addrAdd(base netip.Addr, n uint64) netip.Addr {
	b := base.As16()
	binary.BigEndian.PutUint64(b[8:], binary.BigEndian.Uint64(b[8:])+n)
	a := netip.AddrFrom16(b)
	if base.Is4() {
		return a.Unmap()
	}
	return a
}

// ipAlloc hands out the addresses of one seed's block.
type ipAlloc struct {
	block uint64
	next  uint64
}

// pod returns a fresh IPv4 address (198.18.0.0 + block*ipBlockSize + k) and
// an IPv6 one (2001:db8::block:0:k). It panics past the block's size, which
// withDefaults' bound on the pods of a seed keeps far away.
func (a *ipAlloc) pod() (v4, v6 string) {
	a.next++
	if a.next >= ipBlockSize {
		panic(fmt.Sprintf("seed: IP block %d is full", a.block))
	}
	return addrAdd(podV4Base, a.block*ipBlockSize|a.next).String(), addrAdd(podV6Base, a.block<<32|a.next).String()
}

// node returns node i's address, 198.19.block.(i+1).
func (a *ipAlloc) node(i int) string {
	return addrAdd(nodeV4Base, a.block<<8|uint64(i+1)).String()
}

// Seed creates a small realistic cluster's worth of objects, in an order a
// real cluster would produce them: namespaces with their default
// ServiceAccount, nodes with addresses, Deployments owning ReplicaSets owning
// pods, DaemonSets with host-network pods (several pods per node IP), a Job
// whose Succeeded pod's IP is reused by a Running pod, Services (one
// dual-stack), the Widget CRD (shared by all seeds) and widgets. Pod status
// (phase, IPs, host IP, conditions) is written through the status
// subresource, as a kubelet would.
//
// Seed is not idempotent: a second Seed with the same Prefix fails on
// AlreadyExists.
func Seed(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, opts SeedOptions) (*Seeded, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &seeder{cs: cs, dyn: dyn, o: o, ips: &ipAlloc{block: uint64(o.IPBlock)}}
	s.out = &Seeded{Prefix: o.Prefix, IPBlock: o.IPBlock, NodeIPs: map[string]string{}}
	for _, step := range []func(context.Context) error{
		s.namespaces, s.nodes, s.workloads, s.daemonSets, s.job, s.widgets,
	} {
		if err := step(ctx); err != nil {
			return s.out, fmt.Errorf("seed %q: %w", o.Prefix, err)
		}
	}
	return s.out, nil
}

// SeedForTest is Seed for a test, with the test's name (made a valid DNS
// label) as the default Prefix; it fails the test on error.
func SeedForTest(t testing.TB, cs kubernetes.Interface, dyn dynamic.Interface, opts SeedOptions) *Seeded {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = dnsLabel(t.Name())
	}
	s, err := Seed(t.Context(), cs, dyn, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
