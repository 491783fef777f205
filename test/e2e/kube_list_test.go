package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestKubeListItemsAreTheAPIServers: the items of a /k8s list are the API
// server's, byte for byte, less the managedFields kubeindex strips: no
// kind and apiVersion in the items of a built-in kind's list, both in a
// custom resource's, as the API server writes them.
func TestKubeListItemsAreTheAPIServers(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	ns := seeded.Namespaces[0]
	k := startKubeAPIKubeindex(t, c.Kubeconfig)
	api := newAPIServer(t, c)
	for _, path := range []string{
		"/api/v1/namespaces/" + ns + "/pods",
		"/apis/apps/v1/namespaces/" + ns + "/deployments",
		"/api/v1/nodes",
		"/apis/" + cluster.WidgetGVR.Group + "/" + cluster.WidgetGVR.Version + "/namespaces/" + ns + "/" + cluster.WidgetGVR.Resource,
	} {
		t.Run(path, func(t *testing.T) {
			eventually(t, converge, "the items of "+path, func() error {
				want, err := api.get(context.Background(), path, nil)
				if err != nil {
					return stopPolling{err}
				}
				res, err := k.try(k8sPrefix + path)
				if err != nil {
					return err
				}
				var got, items struct{ Items []json.RawMessage }
				if err := json.Unmarshal(res.body, &got); err != nil {
					return err
				}
				if err := json.Unmarshal(want, &items); err != nil {
					return stopPolling{err}
				}
				if len(got.Items) != len(items.Items) || len(items.Items) == 0 {
					return fmt.Errorf("%d items, the API server %d", len(got.Items), len(items.Items))
				}
				for i, it := range items.Items {
					var meta struct {
						Metadata struct{ ManagedFields json.RawMessage }
					}
					if err := json.Unmarshal(it, &meta); err != nil {
						return stopPolling{err}
					}
					w := string(it)
					if mf := meta.Metadata.ManagedFields; mf != nil {
						w = strings.Replace(w, `,"managedFields":`+string(mf), "", 1)
					}
					if string(got.Items[i]) != w {
						return fmt.Errorf("item %d differs:\nAPI server %s\nkubeindex  %s", i, w, got.Items[i])
					}
				}
				return nil
			})
		})
	}
}
