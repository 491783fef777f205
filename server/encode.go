package server

import (
	"bufio"
	"encoding/json"
	"net/http"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/indexers"
)

// ListMeta is the metadata of list-shaped responses, as in Kubernetes.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion"`
	Continue        string `json:"continue,omitempty"`
	Remaining       int    `json:"remainingItemCount,omitempty"`
}

// IndexValuesResponse is the body of GET /api/v1/resources/{r}/indexes/{i}.
type IndexValuesResponse struct {
	Kind     string             `json:"kind"`
	Resource string             `json:"resource"`
	Index    indexers.Spec      `json:"index"`
	Metadata ListMeta           `json:"metadata"`
	Values   []cache.IndexValue `json:"values"`
}

// writeList writes a Kubernetes-style list envelope around the stored
// object bytes, without decoding or re-encoding any object.
func writeList(w http.ResponseWriter, res cache.ListResult) error {
	meta, err := json.Marshal(ListMeta{ResourceVersion: res.Freshness.ResourceVersion,
		Continue: res.Continue, Remaining: res.Remaining})
	if err != nil {
		return err
	}
	head, err := json.Marshal(struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}{res.Resource.Kind + "List", res.Resource.APIVersion()})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"metadata":`)
	bw.Write(meta)
	writeItems(bw, res.Items)
	bw.WriteString("}\n")
	return bw.Flush()
}

func writeItems(bw *bufio.Writer, items []*cache.Object) {
	bw.WriteString(`,"items":[`)
	for i, o := range items {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.Write(o.Raw())
	}
	bw.WriteByte(']')
}

// writeIPLookup writes the answer to "who has this IP": a summary a service
// can act on (match, pods) and the full pod objects.
func writeIPLookup(w http.ResponseWriter, res cache.IPLookup) error {
	head, err := json.Marshal(struct {
		Kind       string        `json:"kind"`
		APIVersion string        `json:"apiVersion"`
		IP         string        `json:"ip"`
		Match      cache.Match   `json:"match"`
		Metadata   ListMeta      `json:"metadata"`
		Pods       []cache.IPPod `json:"pods"`
	}{"PodIPLookup", "kubeindex/v1", res.IP, res.Match,
		ListMeta{ResourceVersion: res.Freshness.ResourceVersion}, res.Pods})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 16<<10)
	bw.Write(head[:len(head)-1])
	writeItems(bw, res.Items)
	bw.WriteString("}\n")
	return bw.Flush()
}
