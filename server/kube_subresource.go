package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/table"
	"github.com/kubeindex/kubeindex/internal/text"
)

// Subresources of the Kubernetes API (.../pods/{name}/{subresource}):
//
//   - status is the object, read as the API server reads it (get, with
//     Table output), authorized as get on "pods/status";
//   - scale of the built-in kinds that have it is the autoscaling/v1 Scale
//     the API server builds from the object;
//   - any other subresource discovery lists (log, exec, attach,
//     portforward, proxy, eviction, binding, ephemeralcontainers, a custom
//     resource's scale...) is answered 405 with a Status that names it and
//     says to send it to the API server: never a "not found" that would
//     read as if the object did not exist;
//   - one discovery does not list: 404, as the API server answers.

// scaleKinds are the built-in resources whose scale kubeindex builds, as
// their registries do (k8s.io/kubernetes pkg/registry/apps/*/storage,
// pkg/registry/core/replicationcontroller/storage).
var scaleKinds = []schema.GroupResource{
	{Group: "apps", Resource: "deployments"}, {Group: "apps", Resource: "replicasets"},
	{Group: "apps", Resource: "statefulsets"}, {Resource: "replicationcontrollers"},
}

// servedSubresource reports whether kubeindex reads sub of res: status,
// and scale of scaleKinds, where discovery lists them for the resource.
func servedSubresource(res cache.Resource, sub string) bool {
	switch sub {
	case "status":
	case "scale":
		if !slices.Contains(scaleKinds, schema.GroupResource{Group: res.Group, Resource: res.Plural}) {
			return false
		}
	default:
		return false
	}
	return slices.Contains(res.Subresources, sub)
}

// kubeSubresource serves GET of a subresource of t's object.
func (s *Server) kubeSubresource(c echo.Context, t kubeTarget, sub string) error {
	sub, _, _ = strings.Cut(sub, "/") // proxy takes a path after it
	if !slices.Contains(t.res.Subresources, sub) {
		return kubeNotFoundPath()
	}
	if !servedSubresource(t.res, sub) {
		return kubeSubresourceNotServed(t.res, t.name, sub)
	}
	opts, err := kubeListOptions(c.Request(), t.name)
	if err != nil {
		return err
	}
	if opts.Watch {
		return kubeSubresourceNotServed(t.res, t.name, sub+" (watch)")
	}
	gr := schema.GroupResource{Group: t.res.Group, Resource: t.res.Plural}
	if sub == "scale" {
		gr = schema.GroupResource{Group: "autoscaling", Resource: "scales"}
	}
	var tb *tableRequest
	proto := kubeProtoNone
	if kubeProtoOf(t.res) == kubeProtoAll {
		proto = kubeProtoAll // the object, or a Scale: both built-in kinds
	}
	media, asProto := negotiateKube(c.Request(), true, proto)
	if media != kubeJSON {
		asProto = false // the metadata forms of a subresource are not served
	}
	switch media {
	case kubeNotAcceptableM:
		if proto == kubeProtoAll {
			return kubeNotAcceptable("application/json", kubeTableMediaType, kubeProtobufMediaType)
		}
		return kubeNotAcceptable("application/json", kubeTableMediaType)
	case kubeTable:
		if sub == "status" {
			if tb, err = s.tableFor(c, t.res); err != nil {
				return err
			}
		} else {
			topts, err := table.ParseOptions(c.QueryParams())
			if err != nil {
				return apierrors.NewBadRequest(err.Error())
			}
			tb = &tableRequest{conv: table.ForResource(gr), opts: topts}
		}
	}
	if err := s.kubeAllowSub(c, auth.VerbGet, t.res, sub, t.namespace, t.name); err != nil {
		return err
	}
	obj, err := s.kubeObject(c, t, opts.ResourceVersion)
	if err != nil {
		return err
	}
	if asProto && sub == "status" {
		msg, err := obj.Protobuf()
		if err != nil {
			return err
		}
		return writeKubeProtoGet(c.Response(), protoEnvelope{apiVersion: t.res.APIVersion(), kind: t.res.Kind}, msg)
	}
	raw := obj.Raw()
	if sub == "scale" {
		if raw, err = scaleOf(t.res, raw); err != nil {
			return err
		}
		if asProto {
			msg, err := cache.MarshalProtobuf(raw)
			if err != nil {
				return err
			}
			return writeKubeProtoGet(c.Response(), protoEnvelope{apiVersion: "autoscaling/v1", kind: "Scale"}, msg)
		}
	}
	if tb != nil {
		body, err := tb.buildRaw([][]byte{raw}, metav1.ListMeta{})
		if err != nil {
			return err
		}
		return writeTable(c, body)
	}
	return writeJSON(c.Response(), raw)
}

// scaleOf builds the autoscaling/v1 Scale of a scaleKinds object.
func scaleOf(res cache.Resource, raw []byte) ([]byte, error) {
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Replicas *int32          `json:"replicas"`
			Selector json.RawMessage `json:"selector"`
		} `json:"spec"`
		Status struct {
			Replicas int32 `json:"replicas"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	var selector string
	if res.Group == "" { // replicationcontrollers: a map
		var set map[string]string
		if len(o.Spec.Selector) > 0 {
			if err := json.Unmarshal(o.Spec.Selector, &set); err != nil {
				return nil, err
			}
		}
		selector = labels.SelectorFromSet(set).String()
	} else {
		var ls *metav1.LabelSelector
		if len(o.Spec.Selector) > 0 {
			if err := json.Unmarshal(o.Spec.Selector, &ls); err != nil {
				return nil, err
			}
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return nil, err
		}
		selector = sel.String()
	}
	m := o.Metadata
	scale := autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			CreationTimestamp: m.CreationTimestamp},
		Status: autoscalingv1.ScaleStatus{Replicas: o.Status.Replicas, Selector: selector}}
	if o.Spec.Replicas != nil {
		scale.Spec.Replicas = *o.Spec.Replicas
	}
	return json.Marshal(scale)
}

// kubeSubresourceNotServed answers a subresource kubeindex does not serve.
func kubeSubresourceNotServed(res cache.Resource, name, sub string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusMethodNotAllowed,
		Reason:  metav1.StatusReasonMethodNotAllowed,
		Details: &metav1.StatusDetails{Name: text.Truncate(name, 256), Group: res.Group, Kind: res.Plural},
		Message: fmt.Sprintf("%s %q: kubeindex does not serve the subresource %q: it is a read-only cache of the cluster, "+
			"serving objects and their status and scale; send %s requests to the Kubernetes API server itself",
			res.GroupResource(), text.Truncate(name, 256), sub, sub)}}
}
