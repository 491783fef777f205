package server

import (
	"slices"
	"testing"

	"github.com/kubeindex/kubeindex/cache"
)

// Discovery lists groups and resources in the API server's order, not the
// configuration's: kubectl prints `get all` in discovery order.
func TestKubeGroupsInAPIServerOrder(t *testing.T) {
	res := func(group, version, plural string) cache.Resource {
		return cache.Resource{Group: group, Version: version, Plural: plural}
	}
	groups := kubeGroups([]cache.Resource{
		res("example.com", "v1", "widgets"),
		res("", "v1", "services"),
		res("batch", "v1", "jobs"),
		res("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
		res("apps", "v1", "statefulsets"),
		res("autoscaling", "v1", "horizontalpodautoscalers"),
		res("", "v1", "pods"),
		res("apps", "v1", "deployments"),
		res("batch", "v1", "cronjobs"),
		res("abc.example.com", "v1beta1", "things"),
		res("abc.example.com", "v1alpha1", "olds"),
		res("abc.example.com", "v1", "things"),
		res("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"),
	})
	var names []string
	for _, g := range groups {
		names = append(names, g.name)
	}
	want := []string{"", "apps", "autoscaling", "batch", "admissionregistration.k8s.io", "apiextensions.k8s.io",
		"abc.example.com", "example.com"}
	if !slices.Equal(names, want) {
		t.Errorf("groups %q; the API server orders them %q", names, want)
	}
	plurals := func(rs []cache.Resource) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Plural)
		}
		return out
	}
	if got := plurals(groups[0].byVer["v1"]); !slices.Equal(got, []string{"pods", "services"}) {
		t.Errorf("core resources %q; expect by name", got)
	}
	if got := plurals(groups[1].byVer["v1"]); !slices.Equal(got, []string{"deployments", "statefulsets"}) {
		t.Errorf("apps resources %q; expect by name", got)
	}
	if got := groups[6].versions; !slices.Equal(got, []string{"v1", "v1beta1", "v1alpha1"}) {
		t.Errorf("versions %q; expect GA, then beta, then alpha (the first is preferred)", got)
	}
}
