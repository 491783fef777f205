package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
)

// Retire ends every stream this server has open, and any opened after,
// each with a clear end that names why: an SSE error event, a WebSocket
// close frame 1013 (try again later) and a Status in a /k8s watch, all
// answering 503 with why's text. A fleet retires a cluster's server when
// the cluster is removed from the configuration or restarted with a
// changed one; the process and the other servers serve on. The first
// call's reason stays; Retire is safe for concurrent use and to call
// more than once.
func (s *Server) Retire(why string) {
	s.retire(echo.NewHTTPError(http.StatusServiceUnavailable, why))
}

// retiredCause is why the server was retired (Retire), nil until then.
func (s *Server) retiredCause() error {
	return context.Cause(s.retired)
}

// errRetired stands in when a retired server's cause is not an HTTP error.
var errRetired = echo.NewHTTPError(http.StatusServiceUnavailable, "this cluster is no longer served here")

// retiredWhy is why a stream of a retired server ends.
func (s *Server) retiredWhy() error {
	var he *echo.HTTPError
	if err := s.retiredCause(); errors.As(err, &he) {
		return he
	}
	return errRetired
}
