package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/test/cluster"
)

const (
	metadataAccept     = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	metadataListAccept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
)

// getAs GETs url with an Accept header and returns the body of a 200.
func getAs(client *http.Client, url, accept string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %d %s", url, res.StatusCode, b)
	}
	return b, err
}

// lessManagedFields cuts metadata.managedFields out of an object's JSON as
// the API server wrote it: kubeindex strips them at cache entry.
func lessManagedFields(obj []byte) (string, error) {
	var m struct {
		Metadata struct{ ManagedFields json.RawMessage }
	}
	if err := json.Unmarshal(obj, &m); err != nil {
		return "", err
	}
	s := string(obj)
	if mf := m.Metadata.ManagedFields; mf != nil {
		s = strings.Replace(s, `,"managedFields":`+string(mf), "", 1)
	}
	return s, nil
}

// TestKubeMetadataOnly: metadata-only get and list through /k8s are the
// API server's byte for byte (less managedFields), for built-in kinds and
// custom resources; client-go's metadata client lists the same objects
// from both; and the metadata list is a fraction of the whole list's bytes.
func TestKubeMetadataOnly(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ns := seeded.Namespaces[0]
	k := startKubeAPIKubeindex(t, c.Kubeconfig)
	api := newAPIServer(t, c)
	pod := seeded.Pods[0]
	for _, tc := range []struct{ path, accept string }{
		{"/api/v1/namespaces/" + ns + "/pods", metadataListAccept},
		{"/apis/apps/v1/namespaces/" + ns + "/deployments", metadataListAccept},
		{"/api/v1/nodes", metadataListAccept},
		{"/apis/" + cluster.WidgetGVR.Group + "/v1/namespaces/" + ns + "/" + cluster.WidgetGVR.Resource, metadataListAccept},
		{"/api/v1/namespaces/" + pod.Namespace + "/pods/" + pod.Name, metadataAccept},
		{"/apis/" + cluster.WidgetGVR.Group + "/v1/namespaces/" + seeded.Widgets[0].GetNamespace() + "/" + cluster.WidgetGVR.Resource + "/" + seeded.Widgets[0].GetName(), metadataAccept},
	} {
		t.Run(tc.path, func(t *testing.T) {
			eventually(t, converge, "the metadata of "+tc.path, func() error {
				want, err := getAs(api.client, c.Host+tc.path, tc.accept)
				if err != nil {
					return stopPolling{err}
				}
				got, err := getAs(httpClient, k.URL+k8sPrefix+tc.path, tc.accept)
				if err != nil {
					return err
				}
				if tc.accept == metadataAccept {
					w, err := lessManagedFields(want)
					if err != nil {
						return stopPolling{err}
					}
					if strings.TrimSpace(w) != strings.TrimSpace(string(got)) {
						return fmt.Errorf("differs:\nAPI server %s\nkubeindex  %s", w, got)
					}
					return nil
				}
				var wl, gl struct {
					Kind, APIVersion string
					Items            []json.RawMessage
				}
				if err := json.Unmarshal(want, &wl); err != nil {
					return stopPolling{err}
				}
				if err := json.Unmarshal(got, &gl); err != nil {
					return err
				}
				if wl.Kind != gl.Kind || wl.APIVersion != gl.APIVersion || len(wl.Items) != len(gl.Items) || len(wl.Items) == 0 {
					return fmt.Errorf("%s %s of %d items; the API server %s %s of %d", gl.Kind, gl.APIVersion, len(gl.Items), wl.Kind, wl.APIVersion, len(wl.Items))
				}
				for i := range wl.Items {
					w, err := lessManagedFields(wl.Items[i])
					if err != nil {
						return stopPolling{err}
					}
					if w != string(gl.Items[i]) {
						return fmt.Errorf("item %d differs:\nAPI server %s\nkubeindex  %s", i, w, gl.Items[i])
					}
				}
				return nil
			})
		})
	}

	t.Run("client-go's metadata client", func(t *testing.T) {
		names := func(cfg *rest.Config) ([]string, error) {
			mc, err := metadata.NewForConfig(cfg)
			if err != nil {
				return nil, err
			}
			l, err := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var out []string
			for _, it := range l.Items {
				out = append(out, it.Namespace+"/"+it.Name+"@"+it.ResourceVersion)
			}
			slices.Sort(out)
			return out, nil
		}
		eventually(t, converge, "the same pods", func() error {
			want, err := names(c.RESTConfig())
			if err != nil {
				return stopPolling{err}
			}
			got, err := names(k.restConfig())
			if err != nil {
				return err
			}
			if !slices.Equal(want, got) {
				return fmt.Errorf("kubeindex %d pods, the API server %d", len(got), len(want))
			}
			return nil
		})
	})

	whole, err := getAs(httpClient, k.URL+k8sPrefix+"/api/v1/pods", "application/json")
	if err != nil {
		t.Fatal(err)
	}
	meta, err := getAs(httpClient, k.URL+k8sPrefix+"/api/v1/pods", metadataListAccept)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta)*2 > len(whole) {
		t.Errorf("the metadata list is %d bytes, the whole list %d: not metadata only", len(meta), len(whole))
	}
	t.Logf("pods across namespaces from /k8s: whole objects %d bytes, PartialObjectMetadataList %d bytes (%.1f×)",
		len(whole), len(meta), float64(len(whole))/float64(len(meta)))
}
