package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/openapi"
)

// openAPI serves the embedded OpenAPI document, which describes every route
// of the table (server/openapi_test.go holds the two together).
func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapi.Spec)
}
