package main

import (
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeindex/kubeindex/cache"
)

// fakeFound is what a small cluster advertises, through client-go's fake
// discovery client and cache.Discover as in production. It serves a CRD
// named pods in another group, which must not get the built-in's defaults.
func fakeFound(t testing.TB) cache.Discovered {
	t.Helper()
	rw := metav1.Verbs{"get", "list", "watch"}
	res := func(name, singular, kind string, short ...string) metav1.APIResource {
		return metav1.APIResource{Name: name, SingularName: singular, Kind: kind, ShortNames: short, Namespaced: true, Verbs: rw}
	}
	fake := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			res("pods", "pod", "Pod", "po"), res("pods/log", "", "Pod"), res("services", "service", "Service", "svc"),
			{Name: "nodes", SingularName: "node", Kind: "Node", ShortNames: []string{"no"}, Verbs: rw},
			{Name: "namespaces", SingularName: "namespace", Kind: "Namespace", ShortNames: []string{"ns"}, Verbs: rw},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			res("deployments", "deployment", "Deployment", "deploy"), res("replicasets", "replicaset", "ReplicaSet", "rs"),
		}},
		{GroupVersion: "batch/v1", APIResources: []metav1.APIResource{res("jobs", "job", "Job")}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			res("pods", "pod", "Pod"), res("widgets", "widget", "Widget"),
		}},
	}}}
	found, err := cache.Discover(fake)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// configureArgs parses and validates args as run does, then resolves them
// against fakeFound.
func configureArgs(t *testing.T, args ...string) ([]cache.Configured, error) {
	t.Helper()
	cfg, err := parseConfig(args, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg.configure(fakeFound(t))
}

func indexNames(c cache.Configured) string {
	var names []string
	for _, s := range c.Spec.Indexes {
		names = append(names, s.Name+"="+string(s.Type))
	}
	return strings.Join(names, ",")
}

// TestDefaultIndexesFollowTheResolvedResource: every spelling kubectl
// accepts for a resource gets that resource's default indexes, and a
// resource of another group with a built-in's name does not.
func TestDefaultIndexesFollowTheResolvedResource(t *testing.T) {
	const podDefaults = "ip=podIP,node=nodeName,owner=owner"
	tests := []struct {
		given                    string // --resources
		expectResource, expectIx string
	}{
		{"pods", "pods", podDefaults},
		{"po", "pods", podDefaults},
		{"pod", "pods", podDefaults},
		{"Pod", "pods", podDefaults},
		{"v1/pods", "pods", podDefaults},
		{"pods.", "pods", podDefaults},
		{"pods.v1.", "pods", podDefaults},
		{"svc", "services", ""},
		{"deploy", "deployments.apps", ""},
		{"rs", "replicasets.apps", "owner=owner"},
		{"replicasets", "replicasets.apps", "owner=owner"},
		{"ReplicaSet", "replicasets.apps", "owner=owner"},
		{"replicasets.apps", "replicasets.apps", "owner=owner"},
		{"replicasets.v1.apps", "replicasets.apps", "owner=owner"},
		{"apps/v1/replicasets", "replicasets.apps", "owner=owner"},
		{"jobs", "jobs.batch", "owner=owner"},
		{"pods.example.com", "pods.example.com", ""},
		{"example.com/v1/pods", "pods.example.com", ""},
		{"widgets", "widgets.example.com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.given, func(t *testing.T) {
			got, err := configureArgs(t, "--resources", tt.given)
			if err != nil {
				t.Fatal(err)
			}
			if gr := got[0].Resource.GroupResource(); gr != tt.expectResource {
				t.Errorf("resolved to %s, expect %s", gr, tt.expectResource)
			}
			if ix := indexNames(got[0]); ix != tt.expectIx {
				t.Errorf("indexes %q, expect %q", ix, tt.expectIx)
			}
		})
	}
}

// TestIndexFlagsFindTheirResourceByAnySpelling: --index adds to the
// defaults of the resource it names, however either side spells it, and
// conflicts are reported after discovery.
func TestIndexFlagsFindTheirResourceByAnySpelling(t *testing.T) {
	tests := []struct {
		name      string
		given     []string
		expectIx  string // indexes of the first resource
		expectErr []string
	}{
		{name: "short name, plural flag", given: []string{"--resources", "po,svc", "--index", "pods:app=label:app"},
			expectIx: "ip=podIP,node=nodeName,owner=owner,app=label"},
		{name: "plural, kind flag", given: []string{"--resources", "pods", "--index", "Pod:app=label:app"},
			expectIx: "ip=podIP,node=nodeName,owner=owner,app=label"},
		{name: "grouped, short flag", given: []string{"--resources", "replicasets.apps", "--index", "rs:app=label:app"},
			expectIx: "owner=owner,app=label"},
		{name: "flag of another group", given: []string{"--resources", "pods", "--index", "pods.example.com:x=nodeName"},
			expectErr: []string{`--index "pods.example.com:x=nodeName"`, "not configured"}},
		{name: "unserved flag resource", given: []string{"--resources", "pods", "--index", "frobs:x=nodeName"},
			expectErr: []string{`resource "frobs" is not configured`}},
		{name: "flag clashes with a default", given: []string{"--resources", "po", "--index", "pods:ip=label:ip"},
			expectErr: []string{`resource "po"`, `index "ip" is defined twice`}},
		{name: "one resource, two spellings", given: []string{"--resources", "po,pods"},
			expectErr: []string{`"po" and "pods" are both pods`}},
		{name: "unserved resource", given: []string{"--resources", "po,frobs"},
			expectErr: []string{`"frobs"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := configureArgs(t, tt.given...)
			if len(tt.expectErr) > 0 {
				if err == nil {
					t.Fatalf("expect an error, got %v", got)
				}
				for _, w := range tt.expectErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ix := indexNames(got[0]); ix != tt.expectIx {
				t.Errorf("indexes %q, expect %q", ix, tt.expectIx)
			}
		})
	}
}
