package cache

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Discovered is what the API server advertises, flattened: every listable
// and watchable resource of every served version, preferred versions first.
type Discovered []DiscoveredResource

// DiscoveredResource is one resource of one group version.
type DiscoveredResource struct {
	GV        schema.GroupVersion
	API       metav1.APIResource
	Preferred bool
	// Subresources are the names after the slash of the entries
	// "plural/subresource" discovery lists beside the resource.
	Subresources []string
}

// Discover asks the API server for its resources. A group that fails to
// answer (an unavailable aggregated API) is skipped rather than fatal; only
// a resource the user names and that cannot be found stops start-up.
func Discover(d discovery.DiscoveryInterface) (Discovered, error) {
	groups, lists, err := discovery.ServerGroupsAndResources(d)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovering API resources: %w", err)
	}
	preferred := map[string]string{}
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	var out Discovered
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		subs := map[string][]string{}
		for _, r := range l.APIResources {
			if parent, sub, ok := strings.Cut(r.Name, "/"); ok {
				subs[parent] = append(subs[parent], sub)
			}
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			out = append(out, DiscoveredResource{GV: gv, API: r, Preferred: preferred[gv.Group] == gv.Version, Subresources: subs[r.Name]})
		}
	}
	// Core group first, then preferred versions: the order kubectl resolves
	// an ambiguous short name in.
	slices.SortStableFunc(out, func(a, b DiscoveredResource) int {
		if (a.GV.Group == "") != (b.GV.Group == "") {
			return boolOrder(a.GV.Group == "")
		}
		return boolOrder(a.Preferred) - boolOrder(b.Preferred)
	})
	return out, nil
}

func boolOrder(first bool) int {
	if first {
		return -1
	}
	return 1
}

// ErrResourceNotServed is returned by Resolve for a name discovery does not know.
var ErrResourceNotServed = errors.New("the API server does not serve a listable, watchable resource by that name")

// Resolve finds the resource a kubectl-style name means:
//
//	pods | pod | po | Pod        plural, singular, short name or kind
//	deployments.apps             resource.group
//	deployments.v1.apps          resource.version.group
//	apps/v1/deployments, v1/pods group/version/resource
func (d Discovered) Resolve(name string) (Resource, error) {
	if c := d.candidates(name); len(c) > 0 {
		return c[0].toResource(), nil
	}
	return Resource{}, fmt.Errorf("resource %q: %w", name, ErrResourceNotServed)
}

func (d Discovered) candidates(name string) []DiscoveredResource {
	var out []DiscoveredResource
	if parts := strings.Split(name, "/"); len(parts) > 1 {
		var gv schema.GroupVersion
		switch len(parts) {
		case 2:
			gv = schema.GroupVersion{Version: parts[0]}
		case 3:
			gv = schema.GroupVersion{Group: parts[0], Version: parts[1]}
		default:
			return nil
		}
		for _, r := range d {
			if r.GV == gv && r.API.Name == parts[len(parts)-1] {
				out = append(out, r)
			}
		}
		return out
	}
	if res, rest, ok := strings.Cut(name, "."); ok {
		for _, r := range d {
			if r.API.Name != res && r.API.SingularName != res {
				continue
			}
			if r.GV.Group == rest || r.GV.Version+"."+r.GV.Group == rest {
				out = append(out, r)
			}
		}
		if len(out) > 0 {
			return preferredFirst(out)
		}
	}
	for _, r := range d {
		if r.API.Name == name || r.API.SingularName == name || strings.EqualFold(r.API.Kind, name) || slices.Contains(r.API.ShortNames, name) {
			out = append(out, r)
		}
	}
	return out
}

func preferredFirst(rs []DiscoveredResource) []DiscoveredResource {
	slices.SortStableFunc(rs, func(a, b DiscoveredResource) int {
		return boolOrder(a.Preferred) - boolOrder(b.Preferred)
	})
	return rs
}

func (r DiscoveredResource) toResource() Resource {
	return Resource{
		Name:         r.API.Name,
		Group:        r.GV.Group,
		Version:      r.GV.Version,
		Plural:       r.API.Name,
		Singular:     r.API.SingularName,
		Kind:         r.API.Kind,
		ShortNames:   r.API.ShortNames,
		Categories:   r.API.Categories,
		Namespaced:   r.API.Namespaced,
		Subresources: r.Subresources,
	}
}

// ReservedNames are the first path segments the REST API's own routes take
// under /api/v1/ (the server holds its route table to this list): a
// resource whose plural is one of them, such as Cluster API's or
// Karmada's clusters, is named plural.group, else its URLs would be the
// route's.
var ReservedNames = []string{"clusters", "resources", "search", "stream", "ip"}

// NameResources gives every resource its URL name: its plural, unless two
// resources share it or it is reserved, in which case plural.group.
func NameResources(rs []Resource) {
	count := map[string]int{}
	for _, r := range rs {
		count[r.Plural]++
	}
	for _, n := range ReservedNames {
		count[n] += 2
	}
	for i := range rs {
		if count[rs[i].Plural] > 1 {
			rs[i].Name = rs[i].GroupResource()
		} else {
			rs[i].Name = rs[i].Plural
		}
	}
}
