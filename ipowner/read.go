package ipowner

import (
	"strconv"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// What Services and pods say about the addresses and ports they hold,
// read from their stored JSON with jsonscan: pure functions that never
// fail (what is not an address or a port is skipped). A pod's addresses
// are its podIPs, the podIP index's values (indexers.PodIPsOf).

// ServiceAddresses returns the addresses a Service holds: spec.clusterIPs
// (spec.clusterIP when clusterIPs is absent; "None", a headless Service,
// holds none), spec.externalIPs and status.loadBalancer.ingress[].ip, in
// that order, each (address, role) once. It reads only the two members
// given and never fails: what is not an address is skipped.
func ServiceAddresses(spec, status jsonscan.Doc) []Held {
	var out []Held
	add := func(role Role) func([]byte) bool {
		return func(v []byte) bool {
			out = addHeld(out, v, role)
			return true
		}
	}
	if ips := spec.Member("clusterIPs"); len(ips) > 0 && ips[0] == '[' {
		jsonscan.Elements(ips, add(RoleClusterIP))
	} else {
		add(RoleClusterIP)(spec.Member("clusterIP"))
	}
	jsonscan.Elements(spec.Member("externalIPs"), add(RoleExternalIP))
	jsonscan.Elements(jsonscan.Member(status.Member("loadBalancer"), "ingress"), func(e []byte) bool {
		out = addHeld(out, jsonscan.Member(e, "ip"), RoleLoadBalancer)
		return true
	})
	return out
}

// NodeAddresses returns a Node's InternalIP and ExternalIP addresses from
// its status, each (address, role) once. Host names and DNS names are not
// addresses and are skipped.
func NodeAddresses(status jsonscan.Doc) []Held {
	var out []Held
	jsonscan.Elements(status.Member("addresses"), func(e []byte) bool {
		switch jsonString(jsonscan.Member(e, "type")) {
		case "InternalIP":
			out = addHeld(out, jsonscan.Member(e, "address"), RoleNodeInternal)
		case "ExternalIP":
			out = addHeld(out, jsonscan.Member(e, "address"), RoleNodeExternal)
		}
		return true
	})
	return out
}

func addHeld(out []Held, v []byte, role Role) []Held {
	s := jsonString(v)
	if s == "" || s == "None" {
		return out
	}
	ip, ok := indexers.NormalizeIP(s)
	if !ok {
		return out
	}
	h := Held{IP: ip, Role: role}
	for _, have := range out {
		if have == h {
			return out
		}
	}
	return append(out, h)
}

// jsonString decodes a JSON string value; anything else is "".
func jsonString(v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	s, err := jsonscan.String(v)
	if err != nil {
		return ""
	}
	return s
}

// PodPorts returns every containerPort and hostPort a pod's spec declares,
// in its containers and init containers (a restartable init container, a
// sidecar, serves too), protocol TCP when not given, each once.
func PodPorts(spec jsonscan.Doc) []Port {
	var out []Port
	for _, list := range []string{"containers", "initContainers"} {
		jsonscan.Elements(spec.Member(list), func(c []byte) bool {
			jsonscan.Elements(jsonscan.Member(c, "ports"), func(p []byte) bool {
				proto := protocolOf(p)
				out = addPort(out, jsonscan.Member(p, "containerPort"), proto)
				out = addPort(out, jsonscan.Member(p, "hostPort"), proto)
				return true
			})
			return true
		})
	}
	return out
}

// ServicePorts returns the ports a Service's spec declares (spec.ports[].port).
func ServicePorts(spec jsonscan.Doc) []Port {
	var out []Port
	jsonscan.Elements(spec.Member("ports"), func(p []byte) bool {
		out = addPort(out, jsonscan.Member(p, "port"), protocolOf(p))
		return true
	})
	return out
}

func protocolOf(port []byte) string {
	if p := jsonString(jsonscan.Member(port, "protocol")); p != "" {
		return p
	}
	return "TCP"
}

func addPort(out []Port, v []byte, proto string) []Port {
	n, err := strconv.ParseInt(string(v), 10, 32)
	if err != nil || n <= 0 || n > 65535 {
		return out
	}
	p := Port{Number: int32(n), Protocol: proto}
	for _, have := range out {
		if have == p {
			return out
		}
	}
	return append(out, p)
}
