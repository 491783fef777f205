package table

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func endpointSlicePrinter() Convertor {
	return printer[discoveryv1.EndpointSlice]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "AddressType", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]},
		{Name: "Ports", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]},
		{Name: "Endpoints", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"]},
		ageColumn,
	}, cells: func(s *discoveryv1.EndpointSlice, now time.Time) ([]any, []metav1.TableRowCondition) {
		var ports []string
		for _, p := range s.Ports {
			if len(ports) == 3 {
				break
			}
			switch {
			case p.Port != nil:
				ports = append(ports, strconv.Itoa(int(*p.Port)))
			case p.Name != nil:
				ports = append(ports, *p.Name)
			default:
				ports = append(ports, "*")
			}
		}
		var addrs []string
		n := 0
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if len(addrs) < 3 {
					addrs = append(addrs, a)
				}
				n++
			}
		}
		return []any{s.Name, string(s.AddressType), withMore(ports, len(s.Ports)), withMore(addrs, n),
			since(s.CreationTimestamp, now)}, nil
	}}
}

// withMore is the printers' listWithMoreString for lists cut at 3.
func withMore(list []string, count int) string {
	s := strings.Join(list, ",")
	if count > 3 {
		return fmt.Sprintf("%s + %d more...", s, count-3)
	}
	if s == "" {
		return "<unset>"
	}
	return s
}

func ingressPrinter() Convertor {
	return printer[networkingv1.Ingress]{columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Class", Type: "string", Description: "The name of the IngressClass resource that should be used for additional configuration"},
		{Name: "Hosts", Type: "string", Description: "Hosts that incoming requests are matched against before the ingress rule"},
		{Name: "Address", Type: "string", Description: "Address is a list containing ingress points for the load-balancer"},
		{Name: "Ports", Type: "string", Description: "Ports of TLS configurations that open"},
		ageColumn,
	}, cells: func(g *networkingv1.Ingress, now time.Time) ([]any, []metav1.TableRowCondition) {
		class := "<none>"
		if g.Spec.IngressClassName != nil {
			class = *g.Spec.IngressClassName
		}
		in := g.Status.LoadBalancer.Ingress
		ips, hosts := make([]string, len(in)), make([]string, len(in))
		for i := range in {
			ips[i], hosts[i] = in[i].IP, in[i].Hostname
		}
		ports := "80"
		if len(g.Spec.TLS) != 0 {
			ports = "80, 443"
		}
		return []any{g.Name, class, ingressHosts(g.Spec.Rules), lbAddresses(ips, hosts), ports, since(g.CreationTimestamp, now)}, nil
	}}
}

// ingressHosts is the printers' formatHosts: the first three non-empty
// hosts and, once three are taken and another rule follows, how many rules
// there are beyond three.
func ingressHosts(rules []networkingv1.IngressRule) string {
	var list []string
	more := false
	for _, r := range rules {
		if len(list) == 3 {
			more = true
		}
		if !more && r.Host != "" {
			list = append(list, r.Host)
		}
	}
	if len(list) == 0 {
		return "*"
	}
	s := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", s, len(rules)-3)
	}
	return s
}
