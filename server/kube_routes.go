package server

import (
	"fmt"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/internal/text"
)

// kubeMaxWriteBody bounds the body of a write to the Kubernetes API:
// never read, it is allowed in so that the answer is the 405 that says
// why, not a complaint about the body.
const kubeMaxWriteBody = 4 << 20

// kubeWrite answers every write with the API server's 405.
func (s *Server) kubeWrite(c echo.Context) error {
	c.Response().Header().Set("Connection", "close") // the unread body must not be taken for the next request
	s.setAllow(c)
	if sub := c.Param("subresource"); sub != "" {
		sub, _, _ = strings.Cut(sub, "/")
		return kubeReadOnly(fmt.Sprintf("%s of the subresource %q", c.Request().Method, text.Truncate(sub, 64)))
	}
	return kubeReadOnly(c.Request().Method)
}
