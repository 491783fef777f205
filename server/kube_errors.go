package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/text"
)

// The Kubernetes API's errors are metav1.Status objects worded as the API
// server words them (k8s.io/apimachinery/pkg/api/errors): clients such as
// kubectl and client-go decide what to do from reason, code and details.

// kubeNotFoundPath is the API server's answer for a path it does not serve.
func kubeNotFoundPath() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
		Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource",
		Details: &metav1.StatusDetails{}}}
}

// kubeReadOnly answers a write: kubeindex serves reads from its cache.
func kubeReadOnly(method string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusMethodNotAllowed,
		Reason: metav1.StatusReasonMethodNotAllowed, Details: &metav1.StatusDetails{},
		Message: fmt.Sprintf("%s is not allowed: kubeindex is a read-only cache of the cluster; "+
			"send writes to the Kubernetes API server itself", method)}}
}

// kubeNotAcceptable answers a request that accepts no media type served here.
func kubeNotAcceptable(accepted ...string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: " + strings.Join(accepted, ", ")}}
}

// kubeTooLarge is the watch cache's answer when it has not reached a
// resourceVersion within its wait (storage.NewTooLargeResourceVersionError).
func kubeTooLarge(want, current uint64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// kubeExpired is the answer for a resourceVersion older than what is held.
func kubeExpired(want, oldest uint64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", want, oldest))
}

// kubeStatus translates any error into the Status the API server would
// send for it. Internal errors are logged by the caller, never described.
func kubeStatus(err error) metav1.Status {
	var st metav1.Status
	var api apierrors.APIStatus
	var he *echo.HTTPError
	var fe *cache.FieldSelectorError
	switch {
	case errors.As(err, &api):
		st = api.Status()
	case errors.As(err, &he):
		msg, _ := he.Message.(string)
		if msg == "" {
			msg = http.StatusText(he.Code)
		}
		st = metav1.Status{Code: int32(he.Code), Reason: metav1.StatusReason(reasonFor(he.Code)), Message: msg}
		if he.Code == http.StatusInternalServerError {
			st.Message = "Internal error occurred: internal error"
		}
		if he == errTooManyAccessReviews {
			st.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds}
		}
	case errors.Is(err, cache.ErrUnknownResource):
		st = kubeNotFoundPath().(*apierrors.StatusError).ErrStatus
	case errors.As(err, &fe):
		st = apierrors.NewBadRequest(fe.Error()).ErrStatus
	case errors.Is(err, cache.ErrInvalid), errors.Is(err, cache.ErrUnknownIndex), errors.Is(err, errBadRequest):
		msg := err.Error()
		for _, p := range []string{cache.ErrInvalid.Error() + ": ", errBadRequest.Error() + ": "} {
			msg = strings.TrimPrefix(msg, p)
		}
		st = apierrors.NewBadRequest(msg).ErrStatus
	case errors.Is(err, cache.ErrNotSynced):
		// As the watch cache answers before it has initialised.
		st = apierrors.NewTooManyRequests("storage is (re)initializing", 1).ErrStatus
	default:
		st = apierrors.NewInternalError(errors.New("internal error")).ErrStatus
	}
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	st.Status = metav1.StatusFailure
	st.Message = text.Truncate(st.Message, maxMessageBytes) // apimachinery's errors echo the query whole
	if d := st.Details; d != nil {
		d.Name = text.Truncate(d.Name, 256)
		for i := range d.Causes {
			d.Causes[i].Message = text.Truncate(d.Causes[i].Message, maxMessageBytes)
			d.Causes[i].Field = text.Truncate(d.Causes[i].Field, 256)
		}
	}
	return st
}

// writeKubeError answers err as a Status, unless the response has begun.
func (s *Server) writeKubeError(c echo.Context, err error) error {
	st := kubeStatus(err)
	if st.Code == http.StatusInternalServerError {
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	if c.Response().Committed {
		return nil
	}
	body, merr := json.Marshal(st)
	contentType := jsonContentType
	if errorAsProtobuf(c.Request()) {
		body, merr = st.Marshal()
		body = protoStatusEnvelope.appendEnveloped(nil, body)
		contentType = []string{kubeProtobufMediaType}
	}
	if merr != nil {
		return merr
	}
	h := c.Response().Header()
	s.fillFreshness(c) // errors raised before a handler found its resource
	h["Content-Type"] = contentType
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		h.Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	c.Response().WriteHeader(int(st.Code))
	_, werr := c.Response().Write(body)
	return werr
}

// kubeHandler adapts a handler of the Kubernetes API: its errors are
// answered as the API server's Status objects rather than by the
// server's error translation, which speaks kubeindex's own API.
func (s *Server) kubeHandler(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := h(c); err != nil {
			return s.writeKubeError(c, err)
		}
		return nil
	}
}

// kubeObjectNotFound is the API server's answer for a missing object.
func kubeObjectNotFound(group, plural, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: group, Resource: plural}, text.Truncate(name, 256))
}
