package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/internal/text"
)

// freshWait is how long a read asking for a resourceVersion the cache has
// not reached yet waits for it: the API server's watch cache waits as long.
const freshWait = 3 * time.Second

// kubeTarget is what a resource path of the Kubernetes API names.
type kubeTarget struct {
	res             cache.Resource
	namespace, name string
	// asMetadata: the answer is PartialObjectMetadata(List), not the
	// objects (kube_metadata.go).
	asMetadata bool
	// proto: the answer is protobuf, not JSON (kube_protobuf.go).
	proto bool
}

// kubeTargetOf resolves the path's group, version and resource to a
// cached resource: only by its plural, as the API server's paths do.
func (s *Server) kubeTargetOf(c echo.Context, namespace, plural, name string) (kubeTarget, error) {
	group, version := c.Param("group"), c.Param("version")
	if version == "" {
		version = "v1" // the core group's paths, /api/v1/...
	}
	t := kubeTarget{namespace: namespace}
	var found bool
	for _, r := range s.r.APIResources() {
		if r.Group == group && r.Version == version && r.Plural == plural {
			t.res, found = r, true
			break
		}
	}
	if !found {
		return t, kubeNotFoundPath()
	}
	if t.namespace != "" && !t.res.Namespaced || name != "" && t.res.Namespaced && t.namespace == "" {
		return t, kubeNotFoundPath() // /namespaces/x/nodes, /pods/x: not paths of the API server
	}
	t.name = name
	return t, nil
}

// kubeResourcePath handles .../{resource} and .../{resource}/{name}.
func (s *Server) kubeResourcePath(c echo.Context) error {
	plural, err := url.PathUnescape(c.Param("resource"))
	if err != nil {
		return kubeNotFoundPath()
	}
	name, err := url.PathUnescape(c.Param("name"))
	if err != nil {
		return kubeNotFoundPath()
	}
	namespace, err := url.PathUnescape(c.Param("namespace"))
	if err != nil {
		return kubeNotFoundPath()
	}
	sub := c.Param("subresource")
	if c.Param("version") == "" && namespace != "" && name == "" && sub == "" && !s.isCoreResource(plural) {
		// /api/v1/namespaces/{name}/{subresource}: a path of the
		// namespace's subresources as well as of the lists in it.
		namespace, name, sub, plural = "", namespace, plural, "namespaces"
	}
	t, err := s.kubeTargetOf(c, namespace, plural, name)
	if err != nil {
		return err
	}
	if sub != "" {
		return s.kubeSubresource(c, t, sub)
	}
	return s.kubeServe(c, t)
}

// isCoreResource reports whether the core group serves plural.
func (s *Server) isCoreResource(plural string) bool {
	_, ok := s.kubeResource("", plural)
	return ok
}

// kubeNamespace handles /api/v1/namespaces/{name}: a Namespace object.
func (s *Server) kubeNamespace(c echo.Context) error {
	name, err := url.PathUnescape(c.Param("namespace"))
	if err != nil {
		return kubeNotFoundPath()
	}
	t, err := s.kubeTargetOf(c, "", "namespaces", name)
	if err != nil {
		return err
	}
	return s.kubeServe(c, t)
}

func (s *Server) kubeServe(c echo.Context, t kubeTarget) error {
	var tb *tableRequest
	proto := kubeProtoOf(t.res)
	media, asProto := negotiateKube(c.Request(), true, proto)
	switch media {
	case kubeNotAcceptableM:
		if proto == kubeProtoAll {
			return kubeNotAcceptable("application/json", kubeTableMediaType, kubeMetadataMediaType, kubeMetadataListMediaType, kubeProtobufMediaType)
		}
		return kubeNotAcceptable("application/json", kubeTableMediaType, kubeMetadataMediaType, kubeMetadataListMediaType)
	case kubeTable:
		var err error
		if tb, err = s.tableFor(c, t.res); err != nil {
			return err
		}
	}
	opts, err := kubeListOptions(c.Request(), t.name)
	if err != nil {
		return err
	}
	if err := kubeMetadataFits(media, !opts.Watch && t.name == ""); err != nil {
		return err
	}
	t.asMetadata = media == kubeMetadata || media == kubeMetadataList
	t.proto = asProto
	switch {
	case opts.Watch:
		return s.kubeWatch(c, t, &opts, tb)
	case t.name != "":
		return s.kubeGet(c, t, &opts, tb)
	}
	return s.kubeList(c, t, &opts, tb)
}

// kubeListOptions reads and checks the query as the API server does
// (k8s.io/apiserver endpoints/handlers/get.go listOpts): the same
// decoding, defaults and validation, hence the same errors. A request for
// one object that carries a field selector must select that name.
func kubeListOptions(req *http.Request, name string) (metainternalversion.ListOptions, error) {
	opts := metainternalversion.ListOptions{}
	query := req.URL.Query()
	for k, vs := range query {
		for _, v := range vs {
			if len(v) > maxParamBytes { // as on /api/v1: every event is matched against a stream's selectors
				return opts, apierrors.NewBadRequest(fmt.Sprintf("query parameter %q is longer than %d bytes", text.Truncate(k, 64), maxParamBytes))
			}
		}
	}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, &opts); err != nil {
		return opts, apierrors.NewBadRequest(err.Error())
	}
	metainternalversion.SetListOptionsDefaults(&opts, true)
	if errs := metainternalversionvalidation.ValidateListOptions(&opts, true); len(errs) > 0 {
		return opts, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if name != "" && opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		if selected, ok := opts.FieldSelector.RequiresExactMatch("metadata.name"); !ok || selected != name {
			return opts, apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
		}
	}
	return opts, nil
}

// parseKubeRV reads a resourceVersion; "" and "0" are 0.
func parseKubeRV(rv string) (uint64, error) {
	if rv == "" || rv == "0" {
		return 0, nil
	}
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "",
			field.ErrorList{field.Invalid(field.NewPath("resourceVersion"), rv, err.Error())})
	}
	return v, nil
}

// kubePosition returns the position a read answers at, once the cache has
// reached the resourceVersion asked for (NotOlderThan), or is exactly it
// (Exact), as the watch cache decides.
func (s *Server) kubePosition(ctx context.Context, res cache.Resource, rv string, match metav1.ResourceVersionMatch) (uint64, error) {
	want, err := parseKubeRV(rv)
	if err != nil {
		return 0, err
	}
	var pos uint64
	if want == 0 {
		if pos, err = s.r.Position(res.Name); err != nil {
			return 0, err
		}
	} else {
		// WaitPosition answers at once a position this server reached, and
		// waits for one it has not until the event at it is handed on (a
		// watch from it then never repeats it); Position first would move
		// the position before that.
		ctx, cancel := context.WithTimeout(ctx, freshWait)
		defer cancel()
		var reached bool
		if pos, reached, err = s.r.WaitPosition(ctx, res.Name, want); err != nil {
			return 0, err
		}
		if !reached {
			if _, err := s.r.Position(res.Name); err != nil {
				return 0, err // not synced
			}
			return 0, kubeTooLarge(want, pos)
		}
	}
	if match == metav1.ResourceVersionMatchExact && want != pos {
		// The cache holds its current state only, not past ones.
		return 0, kubeExpired(want, pos)
	}
	return pos, nil
}

// kubeAllow checks one verb as the API server's authorizer would, and
// words a refusal as it does.
func (s *Server) kubeAllow(c echo.Context, verb string, res cache.Resource, namespace, name string) error {
	return s.kubeAllowSub(c, verb, res, "", namespace, name)
}

// kubeAllowSub is kubeAllow for a subresource ("" for the resource).
func (s *Server) kubeAllowSub(c echo.Context, verb string, res cache.Resource, sub, namespace, name string) error {
	if !s.authorizing() {
		return nil
	}
	a := s.accessFor(c)
	ok, err := a.decideObject(auth.Attributes{Verb: verb, Group: res.Group, Resource: res.Plural, Subresource: sub, Namespace: namespace, Name: name})
	if err != nil || ok {
		return err
	}
	where := "at the cluster scope"
	if namespace != "" {
		where = fmt.Sprintf("in the namespace %q", text.Truncate(namespace, 128))
	}
	what := res.GroupResource()
	if name != "" {
		what = fmt.Sprintf("%s %q", what, text.Truncate(name, 256))
	}
	resource := res.Plural
	if sub != "" {
		resource += "/" + sub
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Name: text.Truncate(name, 256), Group: res.Group, Kind: res.Plural},
		Message: fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group %q %s",
			what, a.userName(), verb, resource, res.Group, where)}}
}

// kubeObject reads the target object for a get (of it or of a
// subresource) once the caller is allowed: the resourceVersion rules of a
// get, the resource's freshness, and the API server's NotFound.
func (s *Server) kubeObject(c echo.Context, t kubeTarget, resourceVersion string) (*cache.Object, error) {
	if _, err := s.kubePosition(c.Request().Context(), t.res, resourceVersion, ""); err != nil {
		return nil, err
	}
	obj, fresh, err := s.r.Get(t.res.Name, t.namespace, t.name)
	s.setResourceFreshness(c, t.res.Name, fresh)
	if errors.Is(err, cache.ErrNotFound) {
		return nil, kubeObjectNotFound(t.res.Group, t.res.Plural, t.name)
	}
	return obj, err
}

func (s *Server) kubeGet(c echo.Context, t kubeTarget, opts *metainternalversion.ListOptions, tb *tableRequest) error {
	if err := s.kubeAllow(c, auth.VerbGet, t.res, t.namespace, t.name); err != nil {
		return err
	}
	obj, err := s.kubeObject(c, t, opts.ResourceVersion)
	if err != nil {
		return err
	}
	if tb != nil {
		body, err := tb.build([]*cache.Object{obj}, metav1.ListMeta{})
		if err != nil {
			return err
		}
		return writeTable(c, body)
	}
	if t.proto {
		msgs := kubeProtoMessages{metadata: t.asMetadata}
		msg, err := msgs.of(obj)
		if err != nil {
			return err
		}
		return writeKubeProtoGet(c.Response(), msgs.envelope(t.res), msg)
	}
	if t.asMetadata {
		return writeKubeMetadata(c, t.res, obj)
	}
	return writeStored(c, obj)
}

func (s *Server) kubeList(c echo.Context, t kubeTarget, opts *metainternalversion.ListOptions, tb *tableRequest) error {
	if err := s.kubeAllow(c, auth.VerbList, t.res, t.namespace, ""); err != nil {
		return err
	}
	if opts.Continue != "" && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		return apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	pos, err := s.kubePosition(c.Request().Context(), t.res, opts.ResourceVersion, opts.ResourceVersionMatch)
	if err != nil {
		return err
	}
	shard, err := kubeShardSelector(opts)
	if err != nil {
		return err
	}
	q := cache.ListQuery{Namespace: t.namespace, LabelSelector: c.QueryParam("labelSelector"),
		Fields: opts.FieldSelector, Continue: opts.Continue, ShardSelector: shard}
	// A first page at resourceVersion=0 is the whole list: the API server
	// answers it from its watch cache, which ignores limit there
	// (computeListLimit in k8s.io/apiserver's cacher), and client-go's
	// informers list that way, expecting one request, not one per 500.
	if opts.Limit > 0 && (opts.ResourceVersion != "0" || opts.Continue != "") {
		q.Limit = int(min(opts.Limit, int64(maxLimit)))
	}
	res, err := s.r.List(t.res.Name, q)
	s.setResourceFreshness(c, t.res.Name, res.Freshness)
	if err != nil {
		if errors.Is(err, cache.ErrInvalid) && q.Continue != "" {
			var fe *cache.FieldSelectorError
			if !errors.As(err, &fe) {
				return apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %s", err.Error()))
			}
		}
		return err
	}
	meta := ListMeta{ResourceVersion: strconv.FormatUint(pos, 10), Continue: res.Continue, Remaining: res.Remaining}
	lm := metav1.ListMeta{ResourceVersion: meta.ResourceVersion, Continue: meta.Continue}
	if meta.Continue != "" {
		n := int64(meta.Remaining)
		lm.RemainingItemCount = &n
	}
	if tb != nil {
		body, err := tb.build(res.Items, lm)
		if err != nil {
			return err
		}
		return writeTable(c, body)
	}
	if t.proto {
		if shard != nil && !t.asMetadata {
			lm.ShardInfo = &metav1.ShardInfo{Selector: shard.String()}
		}
		msgs := kubeProtoMessages{metadata: t.asMetadata}
		return writeKubeProtoList(c.Response(), msgs.listEnvelope(t.res), lm, res.Items, msgs)
	}
	kind, apiVersion, items := t.res.Kind+"List", t.res.APIVersion(), listItems(t.res)
	if t.asMetadata {
		kind, apiVersion, items = "PartialObjectMetadataList", "meta.k8s.io/v1", metadataOf(t.res)
		c.Response().Header().Set(echo.HeaderContentType, kubeMetadataListMediaType)
	}
	return writeEnvelopeAs(c.Response(), heldConn(c), res.Items, func(b []byte) []byte {
		b = append(b, `{"kind":`...)
		b = jsonscan.AppendString(b, kind)
		b = append(b, `,"apiVersion":`...)
		b = jsonscan.AppendString(b, apiVersion)
		b = append(b, `,"metadata":{"resourceVersion":`...)
		b = jsonscan.AppendString(b, meta.ResourceVersion)
		if meta.Continue != "" {
			b = append(b, `,"continue":`...)
			b = jsonscan.AppendString(b, meta.Continue)
			b = append(b, `,"remainingItemCount":`...)
			b = strconv.AppendInt(b, int64(meta.Remaining), 10)
		}
		if shard != nil && !t.asMetadata {
			// As the API server's list, not its Table or metadata forms.
			b = append(b, `,"shardInfo":{"selector":`...)
			b = jsonscan.AppendString(b, shard.String())
			b = append(b, '}')
		}
		return append(b, '}')
	}, items)
}
