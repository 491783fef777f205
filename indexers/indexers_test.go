package indexers

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

const pod = `{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "web-0", "namespace": "shop",
    "labels": {"app": "web", "app.kubernetes.io/name": "shop-web"},
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6f7c9", "uid": "rs-uid-1", "controller": true}]},
  "spec": {"nodeName": "node-1",
    "containers": [{"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}, {"containerPort": 443}]},
                   {"name": "sidecar", "image": "envoy:1.30", "ports": [{"containerPort": 80}]}]},
  "status": {"phase": "Running", "podIP": "10.1.2.3",
    "podIPs": [{"ip": "10.1.2.3"}, {"ip": "FD00:0:0:0::0A"}]}
}`

func TestIndexFuncs(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		obj  string
		want []string
	}{
		{"pod IPs, dual-stack, IPv6 canonicalised", Spec{Name: "ip", Type: PodIP}, pod, []string{"10.1.2.3", "fd00::a"}},
		{"podIP only", Spec{Name: "ip", Type: PodIP}, `{"status":{"podIP":"10.0.0.7"}}`, []string{"10.0.0.7"}},
		{"podIPs only", Spec{Name: "ip", Type: PodIP}, `{"status":{"podIPs":[{"ip":"2001:db8::1"}]}}`, []string{"2001:db8::1"}},
		{"IPv4-mapped IPv6 unmapped", Spec{Name: "ip", Type: PodIP}, `{"status":{"podIP":"::ffff:10.9.8.7"}}`, []string{"10.9.8.7"}},
		{"garbage IP ignored", Spec{Name: "ip", Type: PodIP}, `{"status":{"podIP":"not-an-ip","podIPs":[{"ip":42}]}}`, nil},
		{"pending pod without IP", Spec{Name: "ip", Type: PodIP}, `{"status":{"phase":"Pending"}}`, nil},
		{"node name", Spec{Name: "node", Type: NodeName}, pod, []string{"node-1"}},
		{"owner by uid and kind/name", Spec{Name: "owner", Type: Owner}, pod, []string{"rs-uid-1", "ReplicaSet/web-6f7c9"}},
		{"no owners", Spec{Name: "owner", Type: Owner}, `{"metadata":{}}`, nil},
		{"label", Spec{Name: "app", Label: "app"}, pod, []string{"web"}},
		{"label with dots and slash", Spec{Name: "n", Label: "app.kubernetes.io/name"}, pod, []string{"shop-web"}},
		{"label missing", Spec{Name: "t", Label: "tier"}, pod, nil},
		{"path array flattened", Spec{Name: "image", Path: "spec.containers.#.image"}, pod, []string{"nginx:1.27", "envoy:1.30"}},
		{"nested arrays flattened and deduplicated", Spec{Name: "port", Path: "spec.containers.#.ports.#.containerPort"}, pod, []string{"80", "443"}},
		{"path scalar", Spec{Name: "phase", Path: "status.phase"}, pod, []string{"Running"}},
		{"path missing", Spec{Name: "x", Path: "spec.nothing"}, pod, nil},
		{"path query", Spec{Name: "x", Path: `spec.containers.#(name=="sidecar").image`}, pod, []string{"envoy:1.30"}},
		{"not JSON at all", Spec{Name: "image", Path: "spec.containers.#.image"}, `]]]`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Validate(); err != nil {
				t.Fatalf("given a valid spec, Validate: %v", err)
			}
			got := tt.spec.Func()([]byte(tt.obj))
			if !slices.Equal(got, tt.want) {
				t.Errorf("expect %q, got %q", tt.want, got)
			}
		})
	}
}

func TestNormalizeIP(t *testing.T) {
	same := [][]string{
		{"fd00::a", "FD00::A", "fd00:0:0:0:0:0:0:a", "fd00:0000::000a", "fd00::a%eth0"},
		{"10.1.2.3", "::ffff:10.1.2.3", " 10.1.2.3 "},
	}
	for _, group := range same {
		for _, v := range group {
			got, ok := NormalizeIP(v)
			if !ok || got != group[0] {
				t.Errorf("NormalizeIP(%q) = %q, %v; expect %q", v, got, ok, group[0])
			}
		}
	}
	for _, bad := range []string{"", "10.1.2", "10.1.2.3.4", "web-0", "fd00:::1", "010.1.2.3"} {
		if got, ok := NormalizeIP(bad); ok {
			t.Errorf("NormalizeIP(%q) = %q; expect rejection", bad, got)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		spec    Spec
		wantErr string // "" = valid
	}{
		{Spec{Name: "ip", Type: PodIP}, ""},
		{Spec{Name: "app", Label: "app.kubernetes.io/name"}, ""},
		{Spec{Name: "img", Path: "spec.containers.#.image"}, ""},
		{Spec{Name: "q", Path: `spec.containers.#(name=="a").image`}, ""},
		{Spec{Name: "m", Path: "spec.containers.@reverse"}, ""},
		{Spec{Name: "", Type: PodIP}, "name"},
		{Spec{Name: "bad name", Type: PodIP}, "name"},
		{Spec{Name: "x"}, "type is missing"},
		{Spec{Name: "x", Type: "ipaddr"}, `unknown type "ipaddr"`},
		{Spec{Name: "x", Type: PodIP, Path: "a"}, "takes neither"},
		{Spec{Name: "x", Label: "bad key!"}, "label key"},
		{Spec{Name: "x", Label: "example.com/A_b.c"}, ""},
		{Spec{Name: "x", Label: "a..b/name"}, "prefix part a lowercase RFC 1123 subdomain"}, // the API server's reason, given
		{Spec{Name: "x", Label: "example.com/"}, "label key"},
		{Spec{Name: "x", Label: strings.Repeat("n", 64)}, "name part must be no more than 63 bytes"},
		{Spec{Name: "x", Path: "spec..image"}, "empty component"},
		{Spec{Name: "x", Path: "spec.containers."}, "empty component"},
		{Spec{Name: "x", Path: ".spec"}, "empty component"},
		{Spec{Name: "x", Path: `spec.containers.#(name=="a"`}, "unclosed"},
		{Spec{Name: "x", Path: `spec.a)`}, "unbalanced"},
		{Spec{Name: "x", Path: `spec.#(name=="a).b`}, "unterminated quote"},
		{Spec{Name: "x", Path: "spec.@nosuchmodifier"}, "unknown modifier"},
		{Spec{Name: "x", Type: Path}, "path is empty"},
	}
	for _, tt := range tests {
		err := tt.spec.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", tt.spec, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%+v: expect error containing %q, got %v", tt.spec, tt.wantErr, err)
		case err != nil && !strings.Contains(err.Error(), "index "):
			t.Errorf("%+v: error %q does not name the index", tt.spec, err)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Spec
		err  bool
	}{
		{"ip=podIP", Spec{Name: "ip", Type: PodIP}, false},
		{"app=label:app", Spec{Name: "app", Type: Label, Label: "app"}, false},
		{"image=path:spec.containers.#.image", Spec{Name: "image", Type: Path, Path: "spec.containers.#.image"}, false},
		{"q=path:a.#(b==\"c:d\").e", Spec{Name: "q", Type: Path, Path: `a.#(b=="c:d").e`}, false},
		{"ip", Spec{}, true},
		{"ip=podIP:x", Spec{}, true},
		{"x=path:a..b", Spec{}, true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("Parse(%q) = %+v, %v; expect %+v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"ip=podIP", "a=label:app", "i=path:spec.containers.#.image", `q=path:a.#(b=="c").d`, "x=path:@reverse", "=", "a=path:(("} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := Parse(s)
		if err != nil {
			return
		}
		// A spec that parses must validate and its function must not panic.
		if err := spec.Validate(); err != nil {
			t.Fatalf("Parse accepted %q but Validate rejects it: %v", s, err)
		}
		spec.Func()([]byte(pod))
	})
}

func FuzzIndexFuncs(f *testing.F) {
	f.Add([]byte(pod), "spec.containers.#.image")
	f.Add([]byte(`{"status":{"podIPs":[[[[[[[[[[[[[[[[[[[[{"ip":"1.2.3.4"}]]]]]]]]]]]]]]]]]]]]}}`), "status.podIPs")
	f.Fuzz(func(t *testing.T, obj []byte, path string) {
		for _, s := range []Spec{{Name: "ip", Type: PodIP}, {Name: "o", Type: Owner}, {Name: "l", Label: "app"}, {Name: "n", Type: NodeName}} {
			s.Func()(obj)
		}
		if ValidatePath(path) == nil {
			Spec{Name: "p", Path: path}.Func()(obj)
		}
	})
}

// FuzzNormalizeIP: the IPv4 shortcut answers what the full normalisation
// answers.
func FuzzNormalizeIP(f *testing.F) {
	for _, s := range []string{"10.1.2.3", " 10.1.2.3", "::ffff:1.2.3.4", "fd00::a%eth0", "1.2.3.4%x", "01.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := NormalizeIP(v)
		addr, err := netip.ParseAddr(strings.TrimSpace(v))
		if ok != (err == nil) || (ok && got != addr.WithZone("").Unmap().String()) {
			t.Fatalf("NormalizeIP(%q) = %q, %t; full normalisation: %v, %v", v, got, ok, addr, err)
		}
	})
}
