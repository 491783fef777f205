package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/ipowner"
	"github.com/kubeindex/kubeindex/query"
)

// errBadRequest marks errors found while parsing a request.
var errBadRequest = errors.New("bad request")

// retryLater is a 503 the caller should retry after a second: it has not
// been refused, something it needs is not there yet (a sync, a review).
type retryLater string

func (e retryLater) Error() string { return string(e) }

// retryAfterSeconds is the advice of every retryLater answer.
const retryAfterSeconds = 1

// errorStatus is the single translation from errors to HTTP: every handler
// returns errors and this decides the code, reason and message. Messages of
// the typed errors are written for users; anything else is an internal
// error whose text is logged, never sent. The body is a Kubernetes
// metav1.Status, so that tools which already understand the API server's
// errors understand ours; its details carry only retry advice.
func errorStatus(err error) metav1.Status {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Message: err.Error()}
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		st.Code = int32(he.Code)
		st.Message = http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok {
			st.Message = m
		}
		st.Reason = metav1.StatusReason(reasonFor(he.Code))
		if he == errTooManyAccessReviews {
			st.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds}
		}
	case errors.Is(err, cache.ErrUnknownResource), errors.Is(err, cache.ErrNotFound), errors.Is(err, ipowner.ErrNotFound),
		errors.Is(err, ErrUnknownCluster):
		st.Code, st.Reason = http.StatusNotFound, "NotFound"
	case errors.Is(err, cache.ErrUnknownIndex), errors.Is(err, cache.ErrInvalid), errors.Is(err, ipowner.ErrInvalid), errors.Is(err, errBadRequest),
		errors.As(err, new(*query.Error)):
		st.Code, st.Reason = http.StatusBadRequest, "BadRequest"
	case errors.Is(err, cache.ErrTooCostly):
		st.Code, st.Reason = http.StatusTooManyRequests, "TooManyRequests"
	case errors.Is(err, cache.ErrBusy):
		st.Code, st.Reason = http.StatusTooManyRequests, "TooManyRequests"
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds}
	case errors.Is(err, cache.ErrExpired):
		st.Code, st.Reason = http.StatusGone, "Expired"
	case errors.Is(err, ipowner.ErrBeforeHistory):
		st.Code, st.Reason = http.StatusGone, "BeforeHistory"
	case errors.Is(err, cache.ErrNotSynced), errors.As(err, new(retryLater)), errors.Is(err, ErrClusterUnavailable):
		st.Code, st.Reason = http.StatusServiceUnavailable, "ServiceUnavailable"
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds}
	default:
		st.Code, st.Reason, st.Message = http.StatusInternalServerError, "InternalError", "internal error"
	}
	st.Message = text.Truncate(st.Message, maxMessageBytes)
	return st
}

// maxMessageBytes bounds an error's message: where one echoes what the
// client sent (a name, a selector, a Last-Event-ID), the echo is cut
// shorter on the spot; this is the bound for any echo missed there.
const maxMessageBytes = 1024

func reasonFor(code int) string {
	switch code {
	case http.StatusNotFound:
		return "NotFound"
	case http.StatusMethodNotAllowed:
		return "MethodNotAllowed"
	case http.StatusBadRequest:
		return "BadRequest"
	case http.StatusRequestEntityTooLarge:
		return "RequestEntityTooLarge"
	case http.StatusTooManyRequests:
		return "TooManyRequests"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	case http.StatusUnauthorized:
		return "Unauthorized"
	case http.StatusForbidden:
		return "Forbidden"
	}
	return "InternalError"
}

// handleError is echo's HTTPErrorHandler.
func (s *Server) handleError(err error, c echo.Context) {
	if errors.Is(err, echo.ErrNotFound) {
		// A path no route matched: under /clusters/{name}/, the cluster
		// is unknown or not serving; on a fleet's front, it is a
		// cluster's path asked without its cluster.
		if miss := clusterMiss(c); miss != nil {
			err = miss
		} else if s.fleetFront() {
			err = errFleetRoot
		}
	}
	st := errorStatus(err)
	if st.Code == http.StatusInternalServerError {
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	if c.Response().Committed {
		return
	}
	s.fillFreshness(c) // errors raised before a handler found its resource
	if st.Code == http.StatusMethodNotAllowed {
		s.setAllow(c) // the path's methods, also when echo's router found none
	}
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	if err := c.JSON(int(st.Code), st); err != nil {
		s.log.Debug("writing error response", "err", err)
	}
}
