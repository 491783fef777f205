package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// resource names one API resource both ways: how kubeindex addresses it
// and where the API server serves it.
type resource struct {
	ki         string // kubeindex's name in URLs
	group      string
	version    string
	plural     string
	namespaced bool
}

var (
	podsR        = resource{"pods", "", "v1", "pods", true}
	servicesR    = resource{"services", "", "v1", "services", true}
	nodesR       = resource{"nodes", "", "v1", "nodes", false}
	namespacesR  = resource{"namespaces", "", "v1", "namespaces", false}
	deploymentsR = resource{"deployments", "apps", "v1", "deployments", true}
	replicasetsR = resource{"replicasets", "apps", "v1", "replicasets", true}
	widgetsR     = resource{"widgets", cluster.WidgetGVR.Group, cluster.WidgetGVR.Version, cluster.WidgetGVR.Resource, true}

	// defaultResources is what kubeindex caches without --config.
	defaultResources = []resource{podsR, servicesR, nodesR, deploymentsR, replicasetsR, namespacesR}
)

// apiPath is the API server's path of the collection (name "") or of one
// object; ns "" lists across namespaces.
func (r resource) apiPath(ns, name string) string {
	p := "/api/" + r.version
	if r.group != "" {
		p = "/apis/" + r.group + "/" + r.version
	}
	if ns != "" {
		p += "/namespaces/" + ns
	}
	p += "/" + r.plural
	if name != "" {
		p += "/" + name
	}
	return p
}

// kiPath is kubeindex's path of the collection (name "") or of one object.
func (r resource) kiPath(ns, name string) string {
	if name == "" {
		return "/api/v1/" + r.ki
	}
	if ns == "" {
		return "/api/v1/" + r.ki + "/" + name
	}
	return "/api/v1/" + r.ki + "/" + ns + "/" + name
}

// apiServer is the oracle: raw JSON from the real API server, as admin.
type apiServer struct {
	host   string
	client *http.Client
}

func newAPIServer(t testing.TB, c *cluster.Cluster) *apiServer {
	t.Helper()
	hc, err := rest.HTTPClientFor(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	hc.Timeout = 30 * time.Second
	return &apiServer{host: c.Host, client: hc}
}

// get GETs a path of the API server and returns the JSON body of a 200.
func (a *apiServer) get(ctx context.Context, path string, query url.Values) ([]byte, error) {
	u := a.host + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("API server GET %s: %d %s", u, res.StatusCode, b)
	}
	return b, nil
}

// object decodes one object's JSON; numbers stay json.Number so that the
// two sides compare exactly.
func decodeObject(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// withoutManagedFields drops metadata.managedFields, which kubeindex strips
// at cache entry.
func withoutManagedFields(obj map[string]any) map[string]any {
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	return obj
}

// listEntry is what list comparisons look at: who, and which version.
type listEntry struct{ Key, ResourceVersion string }

// objectList is the part of a Kubernetes list envelope (the API server's
// and kubeindex's) that comparisons read.
type objectList struct {
	Kind  string `json:"kind"`
	Items []struct {
		Metadata struct {
			Namespace       string `json:"namespace"`
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	} `json:"items"`
}

// entries returns the list's items as keys and versions, sorted by key.
func (l objectList) entries() []listEntry {
	out := make([]listEntry, 0, len(l.Items))
	for _, it := range l.Items {
		k := it.Metadata.Name
		if it.Metadata.Namespace != "" {
			k = it.Metadata.Namespace + "/" + k
		}
		out = append(out, listEntry{k, it.Metadata.ResourceVersion})
	}
	sortEntries(out)
	return out
}

func sortEntries(es []listEntry) {
	sort.Slice(es, func(i, j int) bool { return es[i].Key < es[j].Key })
}

func keys(es []listEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}

// apiList lists r from the API server with query (namespace "" for all).
func (a *apiServer) list(ctx context.Context, r resource, ns string, query url.Values) ([]listEntry, error) {
	b, err := a.get(ctx, r.apiPath(ns, ""), query)
	if err != nil {
		return nil, err
	}
	var l objectList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	return l.entries(), nil
}

// kiList lists r from kubeindex with query.
func (k *kubeindex) list(r resource, query url.Values) ([]listEntry, error) {
	path := r.kiPath("", "")
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var l objectList
	if err := k.getJSON(path, &l); err != nil {
		return nil, err
	}
	return l.entries(), nil
}

// sameList is nil when kubeindex's list of r with kiQuery equals the API
// server's with apiQuery in namespace ns: the same objects at the same
// resourceVersions.
func sameList(ctx context.Context, k *kubeindex, a *apiServer, r resource, ns string, kiQuery, apiQuery url.Values) error {
	want, err := a.list(ctx, r, ns, apiQuery)
	if err != nil {
		return err
	}
	got, err := k.list(r, kiQuery)
	if err != nil {
		return err
	}
	if d := cmp.Diff(want, got); d != "" {
		return fmt.Errorf("%s %v differs from the API server's %s %v (-API server +kubeindex):\n%s", r.ki, kiQuery, r.plural, apiQuery, d)
	}
	return nil
}

// sameObject is nil when kubeindex's object equals the API server's GET of
// it, less metadata.managedFields.
func sameObject(ctx context.Context, k *kubeindex, a *apiServer, r resource, ns, name string) error {
	b, err := a.get(ctx, r.apiPath(ns, name), nil)
	if err != nil {
		return err
	}
	want, err := decodeObject(b)
	if err != nil {
		return err
	}
	resp, err := k.try(r.kiPath(ns, name))
	if err != nil {
		return err
	}
	if resp.code != http.StatusOK {
		return fmt.Errorf("kubeindex GET %s: %d %s", r.kiPath(ns, name), resp.code, resp.body)
	}
	got, err := decodeObject(resp.body)
	if err != nil {
		return err
	}
	if d := cmp.Diff(withoutManagedFields(want), got); d != "" {
		return fmt.Errorf("kubeindex's %s %s/%s differs from the API server's (-API server +kubeindex):\n%s", r.ki, ns, name, d)
	}
	return nil
}

// absent is nil when kubeindex answers 404 for the object.
func absent(k *kubeindex, r resource, ns, name string) error {
	resp, err := k.try(r.kiPath(ns, name))
	if err != nil {
		return err
	}
	if resp.code != http.StatusNotFound {
		return fmt.Errorf("kubeindex GET %s: %d, want 404", r.kiPath(ns, name), resp.code)
	}
	return nil
}

// count returns how many objects of r the API server has.
func (a *apiServer) count(ctx context.Context, r resource) (int, error) {
	es, err := a.list(ctx, r, "", nil)
	return len(es), err
}

// resourceCount is the part of one /api/v1/resources entry that count
// comparisons read.
type resourceCount struct {
	Name   string `json:"name"`
	Plural string `json:"plural"`
	Group  string `json:"group"`
	Count  int    `json:"count"`
	Synced bool   `json:"synced"`
}

// sameCounts is nil when /api/v1/resources counts each of rs as the API
// server does.
func sameCounts(ctx context.Context, k *kubeindex, a *apiServer, rs []resource) error {
	var list struct {
		Resources []resourceCount `json:"resources"`
	}
	if err := k.getJSON("/api/v1/resources", &list); err != nil {
		return err
	}
	var diffs []string
	for _, r := range rs {
		i := slices.IndexFunc(list.Resources, func(s resourceCount) bool {
			return s.Plural == r.plural && s.Group == r.group
		})
		if i < 0 {
			diffs = append(diffs, fmt.Sprintf("%s: not in /api/v1/resources", r.ki))
			continue
		}
		want, err := a.count(ctx, r)
		if err != nil {
			return err
		}
		if got := list.Resources[i]; got.Count != want || !got.Synced {
			diffs = append(diffs, fmt.Sprintf("%s: count %d synced %v, API server has %d", r.ki, got.Count, got.Synced, want))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("/api/v1/resources: %s", strings.Join(diffs, "; "))
	}
	return nil
}
