package server

import (
	"cmp"
	"encoding/json"
	"net/http"
	"runtime"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/kubeindex/kubeindex/cache"
)

// Discovery of the Kubernetes API: exactly the cached resources, each with
// the verbs get, list and watch, as the API server describes them (names,
// kinds, scope, short names, categories). Any authenticated caller may
// read it, as on the API server.

var kubeVerbs = []string{"get", "list", "watch"}

// kubeGroup is one API group of the cached resources, its versions
// newest first (the first is the preferred one), each version's resources
// by name.
type kubeGroup struct {
	name     string
	versions []string
	byVer    map[string][]cache.Resource
}

// kubeGroupOrder is the order in which the API server lists its built-in
// groups: by the priority kube-apiserver registers each with the
// aggregator (cmd/kube-apiserver/app/aggregator.go), highest first, equal
// priorities by name. Other groups (CRDs: priority 1000) come after, by
// name. kubectl prints `get all` in this order.
var kubeGroupOrder = []string{
	"", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "autoscaling", "batch",
	"certificates.k8s.io", "networking.k8s.io", "policy", "rbac.authorization.k8s.io", "storage.k8s.io",
	"admissionregistration.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io",
	"node.k8s.io", "discovery.k8s.io", "resource.k8s.io", "flowcontrol.apiserver.k8s.io",
	"internal.apiserver.k8s.io", "storagemigration.k8s.io",
}

// kubeGroups groups the cached resources in the API server's order: the
// core group ("") first, then kubeGroupOrder, then the others by name;
// within a group, versions newest first (Kubernetes version order), and
// within a version, resources by name.
func kubeGroups(all []cache.Resource) []*kubeGroup {
	core := &kubeGroup{versions: []string{"v1"}, byVer: map[string][]cache.Resource{}}
	out := []*kubeGroup{core}
	byName := map[string]*kubeGroup{"": core}
	for _, r := range all {
		g := byName[r.Group]
		if g == nil {
			g = &kubeGroup{name: r.Group, byVer: map[string][]cache.Resource{}}
			byName[r.Group] = g
			out = append(out, g)
		}
		if _, ok := g.byVer[r.Version]; !ok && r.Group != "" {
			g.versions = append(g.versions, r.Version)
		}
		g.byVer[r.Version] = append(g.byVer[r.Version], r)
	}
	rank := func(name string) int {
		if i := slices.Index(kubeGroupOrder, name); i >= 0 {
			return i
		}
		return len(kubeGroupOrder)
	}
	slices.SortStableFunc(out, func(a, b *kubeGroup) int {
		return cmp.Or(cmp.Compare(rank(a.name), rank(b.name)), strings.Compare(a.name, b.name))
	})
	for _, g := range out {
		slices.SortStableFunc(g.versions, func(a, b string) int { return -version.CompareKubeAwareVersionStrings(a, b) })
		for _, rs := range g.byVer {
			slices.SortStableFunc(rs, func(a, b cache.Resource) int { return strings.Compare(a.Plural, b.Plural) })
		}
	}
	return out
}

func (g *kubeGroup) apiGroup() metav1.APIGroup {
	ag := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g.name}
	for _, v := range g.versions {
		ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.name + "/" + v, Version: v})
	}
	ag.PreferredVersion = ag.Versions[0]
	return ag
}

// kubeServed is what the Kubernetes API under /k8s serves: the cached
// resources and the self reviews.
func (s *Server) kubeServed() []cache.Resource {
	return slices.Concat(s.r.APIResources(), kubeReviewResources)
}

func verbsOf(r cache.Resource) []string {
	if isKubeReview(r.Group, r.Plural) {
		return kubeReviewVerbs
	}
	return kubeVerbs
}

func apiResource(r cache.Resource) metav1.APIResource {
	return metav1.APIResource{Name: r.Plural, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind,
		Verbs: verbsOf(r), ShortNames: r.ShortNames, Categories: r.Categories}
}

// subresourceKind is what a served subresource answers: the object itself
// for status, an autoscaling/v1 Scale for scale.
func subresourceKind(r cache.Resource, sub string) metav1.GroupVersionKind {
	if sub == "scale" {
		return metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	}
	return metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
}

var subresourceVerbs = []string{"get"}

func resourceList(groupVersion string, rs []cache.Resource) metav1.APIResourceList {
	l := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: groupVersion, APIResources: []metav1.APIResource{}}
	for _, r := range rs {
		l.APIResources = append(l.APIResources, apiResource(r))
		for _, sub := range r.Subresources {
			if !servedSubresource(r, sub) {
				continue
			}
			ar := metav1.APIResource{Name: r.Plural + "/" + sub, Namespaced: r.Namespaced, Kind: r.Kind, Verbs: subresourceVerbs}
			if k := subresourceKind(r, sub); k.Kind != r.Kind {
				ar.Group, ar.Version, ar.Kind = k.Group, k.Version, k.Kind
			}
			l.APIResources = append(l.APIResources, ar)
		}
	}
	return l
}

// aggregated is the apidiscovery.k8s.io/v2 form of some groups.
func aggregated(groups []*kubeGroup) apidiscoveryv2.APIGroupDiscoveryList {
	out := apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
		Items:    []apidiscoveryv2.APIGroupDiscovery{}}
	for _, g := range groups {
		gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, v := range g.versions {
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
				Resources: []apidiscoveryv2.APIResourceDiscovery{}}
			for _, r := range g.byVer[v] {
				scope := apidiscoveryv2.ScopeCluster
				if r.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				rd := apidiscoveryv2.APIResourceDiscovery{
					Resource: r.Plural, SingularResource: r.Singular, Scope: scope, Verbs: verbsOf(r),
					ResponseKind: &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
					ShortNames:   r.ShortNames, Categories: r.Categories}
				for _, sub := range r.Subresources {
					if servedSubresource(r, sub) {
						k := subresourceKind(r, sub)
						rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
							Subresource: sub, ResponseKind: &k, Verbs: subresourceVerbs})
					}
				}
				vd.Resources = append(vd.Resources, rd)
			}
			gd.Versions = append(gd.Versions, vd)
		}
		out.Items = append(out.Items, gd)
	}
	return out
}

func writeKubeJSON(c echo.Context, contentType string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentType, contentType)
	c.Response().WriteHeader(http.StatusOK)
	_, err = c.Response().Write(body)
	return err
}

func (s *Server) kubeVersion(c echo.Context) error {
	v := s.opts.KubeVersion
	if v == nil {
		v = &version.Info{GitVersion: "v0.0.0-kubeindex", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
			Platform: runtime.GOOS + "/" + runtime.GOARCH}
	}
	return writeKubeJSON(c, "application/json", v)
}

// kubeAPI serves /k8s/api: the core group's versions, or its aggregated
// discovery.
func (s *Server) kubeAPI(c echo.Context) error {
	groups := kubeGroups(s.kubeServed())
	switch negotiateDiscovery(c.Request()) {
	case kubeDiscoveryV2:
		return writeKubeJSON(c, kubeDiscoveryMediaType, aggregated(groups[:1]))
	case kubeNotAcceptableM:
		return kubeNotAcceptable("application/json", kubeDiscoveryMediaType)
	}
	return writeKubeJSON(c, "application/json", metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: c.Request().Host}}})
}

func (s *Server) kubeCoreResources(c echo.Context) error {
	if negotiateObjects(c.Request(), false) == kubeNotAcceptableM {
		return kubeNotAcceptable("application/json")
	}
	groups := kubeGroups(s.kubeServed())
	return writeKubeJSON(c, "application/json", resourceList("v1", groups[0].byVer["v1"]))
}

// kubeAPIs serves /k8s/apis: the named groups, or their aggregated
// discovery.
func (s *Server) kubeAPIs(c echo.Context) error {
	groups := kubeGroups(s.kubeServed())[1:]
	switch negotiateDiscovery(c.Request()) {
	case kubeDiscoveryV2:
		return writeKubeJSON(c, kubeDiscoveryMediaType, aggregated(groups))
	case kubeNotAcceptableM:
		return kubeNotAcceptable("application/json", kubeDiscoveryMediaType)
	}
	l := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range groups {
		l.Groups = append(l.Groups, g.apiGroup())
	}
	return writeKubeJSON(c, "application/json", l)
}

func (s *Server) findGroup(name string) *kubeGroup {
	for _, g := range kubeGroups(s.kubeServed())[1:] {
		if g.name == name {
			return g
		}
	}
	return nil
}

func (s *Server) kubeGroup(c echo.Context) error {
	if negotiateObjects(c.Request(), false) == kubeNotAcceptableM {
		return kubeNotAcceptable("application/json")
	}
	g := s.findGroup(c.Param("group"))
	if g == nil {
		return kubeNotFoundPath()
	}
	return writeKubeJSON(c, "application/json", g.apiGroup())
}

func (s *Server) kubeGroupVersion(c echo.Context) error {
	if negotiateObjects(c.Request(), false) == kubeNotAcceptableM {
		return kubeNotAcceptable("application/json")
	}
	g := s.findGroup(c.Param("group"))
	if g == nil {
		return kubeNotFoundPath()
	}
	v := c.Param("version")
	rs, ok := g.byVer[v]
	if !ok {
		return kubeNotFoundPath()
	}
	return writeKubeJSON(c, "application/json", resourceList(g.name+"/"+v, rs))
}
