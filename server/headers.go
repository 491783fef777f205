package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
)

// Freshness headers, on every response.
const (
	HeaderResourceVersion = "X-Kubeindex-Resource-Version"
	HeaderSynced          = "X-Kubeindex-Synced"
	HeaderWatch           = "X-Kubeindex-Watch"
	HeaderStale           = "X-Kubeindex-Stale"
	HeaderLastEvent       = "X-Kubeindex-Last-Event"
	HeaderSimulated       = "X-Kubeindex-Simulated"
)

// setFreshness writes a resource's freshness into the headers.
func setFreshness(h http.Header, f cache.Freshness) {
	if f.ResourceVersion != "" {
		h.Set(HeaderResourceVersion, f.ResourceVersion)
	}
	h.Set(HeaderSynced, strconv.FormatBool(f.Synced))
	h.Set(HeaderStale, strconv.FormatBool(f.Stale))
	if f.WatchConnected {
		h.Set(HeaderWatch, "connected")
	} else {
		h.Set(HeaderWatch, "disconnected")
	}
	if !f.LastEvent.IsZero() {
		h.Set(HeaderLastEvent, f.LastEvent.UTC().Format(time.RFC3339Nano))
	}
	if f.Simulated {
		h.Set(HeaderSimulated, "true")
	}
}

// freshnessHeaders gives responses that are not about one resource (health,
// resource lists, unknown routes, errors before a resource was found) the
// freshness of the cache as a whole. Handlers about one resource set their
// own first; this only fills in what is missing, just before the header is
// written, so the hot paths pay nothing for it.
func (s *Server) freshnessHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		c.Response().Before(func() {
			if h.Get(HeaderStale) == "" {
				setFreshness(h, s.r.Freshness())
			}
		})
		return next(c)
	}
}
