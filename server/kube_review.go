package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubeindex/kubeindex/cache"
)

// The self reviews: SelfSubjectAccessReview, SelfSubjectRulesReview and
// SelfSubjectReview. A client POSTs them, but they create nothing: they
// are questions about the caller (kubectl auth can-i, kubectl auth whoami,
// the permission checks dashboards such as k9s make before they list).
// kubeindex answers them itself, as it would decide the caller's requests
// (kube_review_decide.go), in the API server's shapes
// (k8s.io/kubernetes pkg/registry/authorization, pkg/registry/authentication).

// kubeMaxReviewBody bounds a review's body: a question, however long its
// selectors, is far smaller.
const kubeMaxReviewBody = 256 << 10

// kubeReviewResources are the reviews as discovery lists them: cluster
// scoped, the one verb create.
var kubeReviewResources = []cache.Resource{
	{Group: authzv1.GroupName, Version: "v1", Plural: "selfsubjectaccessreviews", Singular: "selfsubjectaccessreview", Kind: "SelfSubjectAccessReview"},
	{Group: authzv1.GroupName, Version: "v1", Plural: "selfsubjectrulesreviews", Singular: "selfsubjectrulesreview", Kind: "SelfSubjectRulesReview"},
	{Group: authnv1.GroupName, Version: "v1", Plural: "selfsubjectreviews", Singular: "selfsubjectreview", Kind: "SelfSubjectReview"},
}

var kubeReviewVerbs = []string{"create"}

// isKubeReview reports whether r is one of kubeReviewResources.
func isKubeReview(group, plural string) bool {
	for _, r := range kubeReviewResources {
		if r.Group == group && r.Plural == plural {
			return true
		}
	}
	return false
}

// kubeReviewPath is where a review is POSTed.
func kubeReviewPath(r cache.Resource) string {
	return "/k8s/apis/" + r.Group + "/" + r.Version + "/" + r.Plural
}

// kubeReviewRoutes are the reviews' entries of the route table: any
// authenticated caller may ask about itself, as the API server's
// system:basic-user role allows everyone.
func (s *Server) kubeReviewRoutes() []*route {
	handlers := map[string]echo.HandlerFunc{
		"selfsubjectaccessreviews": s.kubeAccessReview,
		"selfsubjectrulesreviews":  s.kubeRulesReview,
		"selfsubjectreviews":       s.kubeSelfReview,
	}
	var out []*route
	for _, r := range kubeReviewResources {
		out = append(out, &route{method: http.MethodPost, path: kubeReviewPath(r), kind: restKind, authz: authenticated,
			maxBody: kubeMaxReviewBody, handler: s.kubeHandler(handlers[r.Plural]),
			summary: "Kubernetes API: a " + r.Kind + ", answered as kubeindex decides for the caller; creates nothing."})
	}
	return out
}

// kubeAccessReview answers a SelfSubjectAccessReview: may the caller do
// this? Validated as the API server validates it.
func (s *Server) kubeAccessReview(c echo.Context) error {
	var sar authzv1.SelfSubjectAccessReview
	if err := decodeKubeReview(c, authzv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"), &sar); err != nil {
		return err
	}
	if errs := validateAccessReview(&sar); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: authzv1.GroupName, Kind: "SelfSubjectAccessReview"}, "", errs)
	}
	st, err := s.accessFor(c).review(sar.Spec)
	if err != nil {
		return err
	}
	sar.Status = st
	return writeKubeReview(c, &sar)
}

// kubeRulesReview answers a SelfSubjectRulesReview: what may the caller do
// in this namespace? As on the API server, the answer's spec is empty.
func (s *Server) kubeRulesReview(c echo.Context) error {
	var in authzv1.SelfSubjectRulesReview
	if err := decodeKubeReview(c, authzv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview"), &in); err != nil {
		return err
	}
	if in.Spec.Namespace == "" {
		return apierrors.NewBadRequest("no namespace on request")
	}
	st, err := s.accessFor(c).rules(in.Spec.Namespace)
	if err != nil {
		return err
	}
	return writeKubeReview(c, &authzv1.SelfSubjectRulesReview{Status: st})
}

// kubeSelfReview answers a SelfSubjectReview: who is the caller? Without
// authentication every caller is anonymous, as the API server names one.
func (s *Server) kubeSelfReview(c echo.Context) error {
	var in authnv1.SelfSubjectReview
	if err := decodeKubeReview(c, authnv1.SchemeGroupVersion.WithKind("SelfSubjectReview"), &in); err != nil {
		return err
	}
	out := &authnv1.SelfSubjectReview{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Now()}}
	ui := &out.Status.UserInfo
	if u := userOf(c); u != nil {
		ui.Username, ui.UID, ui.Groups = u.Name, u.UID, u.Groups
		for k, v := range u.Extra {
			if ui.Extra == nil {
				ui.Extra = make(map[string]authnv1.ExtraValue, len(u.Extra))
			}
			ui.Extra[k] = v
		}
	} else {
		ui.Username, ui.Groups = "system:anonymous", []string{"system:unauthenticated"}
	}
	return writeKubeReview(c, out)
}

// validateAccessReview is the API server's ValidateSelfSubjectAccessReview
// (k8s.io/kubernetes pkg/apis/authorization/validation): one of resource
// and non-resource attributes, well-formed selectors, no metadata.
func validateAccessReview(sar *authzv1.SelfSubjectAccessReview) field.ErrorList {
	var errs field.ErrorList
	spec, fld := sar.Spec, field.NewPath("spec")
	if spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(fld.Child("nonResourceAttributes"), spec.NonResourceAttributes, `cannot be specified in combination with resourceAttributes`))
	}
	if spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil {
		errs = append(errs, field.Invalid(fld.Child("resourceAttributes"), spec.NonResourceAttributes, `exactly one of nonResourceAttributes or resourceAttributes must be specified`))
	}
	if ra := spec.ResourceAttributes; ra != nil {
		sel := fld.Child("resourceAttributes")
		if fs := ra.FieldSelector; fs != nil {
			p := sel.Child("fieldSelector")
			errs = append(errs, selectorShape(p, fs.RawSelector, len(fs.Requirements))...)
			for i, r := range fs.Requirements {
				errs = append(errs, metav1validation.ValidateFieldSelectorRequirement(r,
					metav1validation.FieldSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}, p.Child("requirements").Index(i))...)
			}
		}
		if ls := ra.LabelSelector; ls != nil {
			p := sel.Child("labelSelector")
			errs = append(errs, selectorShape(p, ls.RawSelector, len(ls.Requirements))...)
			for i, r := range ls.Requirements {
				errs = append(errs, metav1validation.ValidateLabelSelectorRequirement(r,
					metav1validation.LabelSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}, p.Child("requirements").Index(i))...)
			}
		}
	}
	meta := sar.ObjectMeta
	meta.ManagedFields = nil
	if !apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, meta) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), sar.ObjectMeta, `must be empty`))
	}
	return errs
}

// selectorShape: a selector of an access review is raw or requirements,
// exactly one.
func selectorShape(p *field.Path, raw string, requirements int) field.ErrorList {
	switch {
	case raw != "" && requirements > 0:
		return field.ErrorList{field.Invalid(p.Child("rawSelector"), raw, "may not specified at the same time as requirements")}
	case raw == "" && requirements == 0:
		return field.ErrorList{field.Required(p.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", p))}
	}
	return nil
}

// kubeReviewMediaTypes are the bodies a review may come in: the API
// server's serializers for the built-in kinds.
var kubeReviewMediaTypes = []string{runtime.ContentTypeJSON, runtime.ContentTypeYAML, runtime.ContentTypeProtobuf}

// decodeKubeReview reads a review's body into into, as the API server's
// create handler does: by Content-Type (JSON when none), the kind and
// version defaulted to gvk and required to be gvk's if given, unknown
// fields refused under fieldValidation=Strict and otherwise reported as
// Warning headers (the default, Warn).
func decodeKubeReview(c echo.Context, gvk schema.GroupVersionKind, into runtime.Object) error {
	req := c.Request()
	if negotiateObjects(req, false) == kubeNotAcceptableM {
		return kubeNotAcceptable(runtime.ContentTypeJSON)
	}
	mediaType := runtime.ContentTypeJSON
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return kubeUnsupportedMediaType()
		}
		mediaType = mt
	}
	var info runtime.SerializerInfo
	for _, i := range scheme.Codecs.SupportedMediaTypes() {
		if i.MediaType == mediaType && slices.Contains(kubeReviewMediaTypes, mediaType) {
			info = i
		}
	}
	if info.Serializer == nil {
		return kubeUnsupportedMediaType()
	}
	body, err := io.ReadAll(req.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", tooLarge.Limit))
	}
	if err != nil {
		return apierrors.NewBadRequest("the request body could not be read")
	}
	directive := req.URL.Query().Get("fieldValidation")
	dec := info.Serializer
	if info.StrictSerializer != nil && directive != metav1.FieldValidationIgnore {
		dec = info.StrictSerializer
	}
	obj, got, err := dec.Decode(body, &gvk, into)
	if strict, ok := runtime.AsStrictDecodingError(err); ok && obj != nil && directive != metav1.FieldValidationStrict {
		for _, e := range strict.Errors() {
			c.Response().Header().Add("Warning", fmt.Sprintf("299 - %q", e.Error()))
		}
		err = nil
	}
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if got.GroupVersion() != gvk.GroupVersion() {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%v)",
			got.GroupVersion(), gvk.GroupVersion()))
	}
	if obj != into {
		return apierrors.NewBadRequest(fmt.Sprintf("not a %s: %s", gvk.Kind, got.Kind))
	}
	return nil
}

// kubeUnsupportedMediaType is the API server's answer for a body in a
// format it does not read.
func kubeUnsupportedMediaType() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " +
			strings.Join(kubeReviewMediaTypes, ", ")}}
}

// writeKubeReview answers a review as the API server answers a create:
// 201, the object with its kind and apiVersion.
func writeKubeReview(c echo.Context, obj runtime.Object) error {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentType, runtime.ContentTypeJSON)
	c.Response().WriteHeader(http.StatusCreated)
	_, err = c.Response().Write(body)
	return err
}
