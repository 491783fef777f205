package scenario

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// node is what the scenario remembers of a node: where pods go and which
// addresses they get.
type node struct {
	name  string
	index int    // 1-based; the third octet of its pod CIDR
	net   int    // the second octet of its pod CIDR
	ipv4  string // InternalIP
	ipv6  string // second InternalIP on dual-stack nodes, else ""
}

func newNode(i, podNetwork int) node {
	n := node{name: fmt.Sprintf("node-%d", i), index: i, net: podNetwork, ipv4: fmt.Sprintf("10.0.0.%d", 10+i)}
	if i%2 == 1 { // node-1, node-3, ...
		n.ipv6 = netip.AddrFrom16([16]byte{0xfd, 0x00, 0, 0x10, 14: byte(i >> 8), 15: byte(10 + i)}).String()
	}
	return n
}

func (n node) dualStack() bool { return n.ipv6 != "" }

// hostIPs are the node's addresses, as a hostNetwork pod's podIPs.
func (n node) hostIPs() []string {
	if n.dualStack() {
		return []string{n.ipv4, n.ipv6}
	}
	return []string{n.ipv4}
}

func (n node) podCIDRs() []string {
	cidrs := []string{fmt.Sprintf("10.%d.%d.0/24", n.net, n.index)}
	if n.dualStack() {
		cidrs = append(cidrs, fmt.Sprintf("fd00:10:244:%x::/64", n.index))
	}
	return cidrs
}

// podAddrs returns host number h of the node's pod CIDRs: the IPv4 address
// and, on a dual-stack node, the IPv6 one such as fd00:10:244:1::1a.
func (n node) podAddrs(h int) []string {
	ips := []string{fmt.Sprintf("10.%d.%d.%d", n.net, n.index, h)}
	if n.dualStack() {
		ips = append(ips, fmt.Sprintf("fd00:10:244:%x::%x", n.index, h))
	}
	return ips
}

// allocPodIPs gives a new pod on n the lowest free address of the node's
// range, as host-local IPAM does. An address is taken while a pod that is
// not hostNetwork and has not completed holds it: completed pods keep
// their status.podIP, so their address is handed out again, which is how
// a Succeeded pod and a Running pod come to share an IP. Every pod in the
// store counts, generated or not. s.mu must be held.
func (s *Scenario) allocPodIPs(n node) []string {
	used := map[string]bool{}
	for _, p := range list[corev1.Pod](s, pods) {
		if p.Spec.NodeName != n.name || p.Spec.HostNetwork {
			continue
		}
		if ph := p.Status.Phase; ph == corev1.PodSucceeded || ph == corev1.PodFailed {
			continue
		}
		if ip := p.Status.PodIP; ip != "" {
			used[ip] = true
		}
	}
	for h := 2; h < 255; h++ {
		if ips := n.podAddrs(h); !used[ips[0]] {
			return ips
		}
	}
	panic(storeError{fmt.Errorf("scenario: pod range of %s exhausted", n.name)})
}

// pickNode returns a random node. s.mu must be held.
func (s *Scenario) pickNode() node { return s.nodes[s.rng.IntN(len(s.nodes))] }

// nodeByName finds a node of the scenario.
func (s *Scenario) nodeByName(name string) (node, bool) {
	for _, n := range s.nodes {
		if n.name == name {
			return n, true
		}
	}
	return node{}, false
}

// nextServiceIP returns the next free ClusterIP (and its IPv6 twin).
// s.mu must be held.
func (s *Scenario) nextServiceIP() (string, string) {
	s.serviceIPs++
	n := s.serviceIPs + 10 // 10.96.0.1 and .10 are kubernetes and kube-dns
	return fmt.Sprintf("10.96.%d.%d", n/250, n%250+1), fmt.Sprintf("fd00:10:96::%x", n)
}
