package server

import (
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// What a request of the Kubernetes API may be answered with, in JSON or
// (negotiateKube) protobuf.
type kubeMedia int

const (
	kubeJSON           kubeMedia = iota // the object, the list or the watch events as they are
	kubeTable                           // a meta.k8s.io/v1 Table
	kubeDiscoveryV2                     // an apidiscovery.k8s.io/v2 APIGroupDiscoveryList
	kubeNotAcceptableM                  // nothing offered is served
	kubeMetadata                        // meta.k8s.io/v1 PartialObjectMetadata: an object's or an event's metadata
	kubeMetadataList                    // meta.k8s.io/v1 PartialObjectMetadataList: a list's
)

const (
	kubeTableMediaType        = "application/json;as=Table;v=v1;g=meta.k8s.io"
	kubeMetadataMediaType     = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	kubeMetadataListMediaType = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	kubeDiscoveryMediaType    = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)

// mediaRange is one entry of an Accept header.
type mediaRange struct {
	typ, sub string
	params   map[string]string
	q        float64
}

// parseAccept reads an Accept header into its ranges, most preferred
// first (by q, then by order). Entries that do not parse are skipped.
func parseAccept(h string) []mediaRange {
	var out []mediaRange
	for part := range strings.SplitSeq(h, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			continue
		}
		typ, sub, _ := strings.Cut(mt, "/")
		r := mediaRange{typ: typ, sub: sub, params: params, q: 1}
		if q, ok := params["q"]; ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil {
				r.q = v
			}
		}
		if r.q > 0 {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b mediaRange) int {
		switch {
		case a.q > b.q:
			return -1
		case a.q < b.q:
			return 1
		}
		return 0
	})
	return out
}

// json reports whether r accepts plain JSON.
func (r mediaRange) json() bool {
	if r.params["as"] != "" {
		return false
	}
	return r.typ == "*" || r.typ == "application" && (r.sub == "*" || r.sub == "json")
}

func (r mediaRange) is(as, version, group string) bool {
	return r.typ == "application" && r.sub == "json" && r.params["as"] == as && r.params["v"] == version && r.params["g"] == group
}

// negotiateObjects picks how to answer a get, list or watch: the first of
// JSON and (when table is served: reads of objects) Table,
// PartialObjectMetadata and PartialObjectMetadataList that the client
// accepts. As on the API server, the choice does not depend on whether
// the request is a list: a list asked for as PartialObjectMetadata is
// refused after (kubeMetadataFor).
func negotiateObjects(req *http.Request, table bool) kubeMedia {
	media, _ := negotiateKube(req, table, kubeProtoNone)
	return media
}

// kubeProto is which protobuf answers a resource has.
type kubeProto int

const (
	kubeProtoNone     kubeProto = iota // none: JSON only
	kubeProtoMetadata                  // PartialObjectMetadata(List) only: a custom resource's
	kubeProtoAll                       // the objects too: a built-in kind's
)

// negotiateKube is negotiateObjects where protobuf (Content-Type
// application/vnd.kubernetes.protobuf) may be served too, as proto says:
// the answer's form, and whether it is protobuf. As on the API server, a
// Table is JSON only, and the metadata forms are offered in protobuf for
// every resource, custom ones included, whose objects are JSON only.
func negotiateKube(req *http.Request, table bool, proto kubeProto) (kubeMedia, bool) {
	h := strings.Join(req.Header.Values("Accept"), ",")
	if strings.TrimSpace(h) == "" {
		return kubeJSON, false
	}
	for _, r := range parseAccept(h) {
		if r.protobuf() && proto != kubeProtoNone {
			switch {
			case r.params["as"] == "" && proto == kubeProtoAll:
				return kubeJSON, true
			case table && r.isMeta("PartialObjectMetadata"):
				return kubeMetadata, true
			case table && r.isMeta("PartialObjectMetadataList"):
				return kubeMetadataList, true
			}
			continue
		}
		switch {
		case r.json():
			return kubeJSON, false
		case table && r.is("Table", "v1", "meta.k8s.io"):
			return kubeTable, false
		case table && r.is("PartialObjectMetadata", "v1", "meta.k8s.io"):
			return kubeMetadata, false
		case table && r.is("PartialObjectMetadataList", "v1", "meta.k8s.io"):
			return kubeMetadataList, false
		}
	}
	return kubeNotAcceptableM, false
}

// protobuf reports whether r is the Kubernetes protobuf media type (as
// the API server reads it: a stream parameter other than "watch" is not).
func (r mediaRange) protobuf() bool {
	if s, ok := r.params["stream"]; ok && s != "watch" {
		return false
	}
	return r.typ == "application" && r.sub == "vnd.kubernetes.protobuf"
}

// isMeta reports whether r asks for the meta.k8s.io/v1 kind as.
func (r mediaRange) isMeta(as string) bool {
	return r.params["as"] == as && r.params["v"] == "v1" && r.params["g"] == "meta.k8s.io"
}

// negotiateDiscovery picks between aggregated discovery and the legacy
// documents for /api and /apis.
func negotiateDiscovery(req *http.Request) kubeMedia {
	h := strings.Join(req.Header.Values("Accept"), ",")
	if strings.TrimSpace(h) == "" {
		return kubeJSON
	}
	for _, r := range parseAccept(h) {
		switch {
		case r.json():
			return kubeJSON
		case r.is("APIGroupDiscoveryList", "v2", "apidiscovery.k8s.io"):
			return kubeDiscoveryV2
		}
	}
	return kubeNotAcceptableM
}
