package server

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/web"
)

// Security headers of every dashboard response, beside those of every
// response (newSecurityHeaders: nosniff among them, which set here too
// would be sent twice where the connection writes those, headlines.go).
// The dashboard loads nothing from elsewhere and runs no inline script or
// style, so the policy allows only its own origin (which, for connect-src,
// includes the same-origin WebSocket); it may not be framed.
var dashboardHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; base-uri 'none'; object-src 'none'; " +
		"frame-ancestors 'none'; form-action 'self'",
	"Referrer-Policy": "no-referrer",
	"X-Frame-Options": "DENY",
}

// dashboardTypes are the content types of the files the dashboard may hold;
// any other extension is refused when the files are loaded, so that a
// stray file cannot be served with a guessed type.
var dashboardTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// webAsset is one dashboard file, ready to serve.
type webAsset struct {
	body        []byte
	contentType string
	etag        string
}

// dashboardAssets maps URL paths ("/", "/ui/app.js") to the embedded files.
// They are read and hashed once, on first use; the files are immutable.
var dashboardAssets = sync.OnceValues(func() (map[string]webAsset, error) {
	return loadWebAssets(web.Files)
})

// loadWebAssets reads index.html, served at /, and the flat directory ui/,
// served at /ui/{file}.
func loadWebAssets(fsys fs.FS) (map[string]webAsset, error) {
	out := map[string]webAsset{}
	add := func(urlPath, name string) error {
		ct, ok := dashboardTypes[path.Ext(name)]
		if !ok {
			return fmt.Errorf("dashboard file %s: no content type for its extension", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[urlPath] = webAsset{body: b, contentType: ct,
			etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
		return nil
	}
	if err := add("/", "index.html"); err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(fsys, "ui")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() {
			return nil, fmt.Errorf("dashboard directory ui/%s: ui/ must be flat (served as /ui/{file})", e.Name())
		}
		if err := add("/ui/"+e.Name(), "ui/"+e.Name()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Server) dashboardPage(c echo.Context) error {
	return serveDashboard(c, "/")
}

func (s *Server) dashboardFile(c echo.Context) error {
	file, err := pathParam(c, "file")
	if err != nil {
		return err
	}
	return serveDashboard(c, "/ui/"+file)
}

// serveDashboard writes one embedded file with the dashboard's security
// headers. Files are revalidated on every load (no-cache with a content
// ETag), so a new binary never runs with a cached old script.
func serveDashboard(c echo.Context, urlPath string) error {
	h := c.Response().Header()
	for k, v := range dashboardHeaders {
		h.Set(k, v)
	}
	assets, err := dashboardAssets()
	if err != nil {
		return err // a build defect; reported as a 500 and logged
	}
	a, ok := assets[urlPath]
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("the dashboard has no file %s", text.Truncate(urlPath, 128)))
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	if c.Request().Header.Get("If-None-Match") == a.etag {
		return c.NoContent(http.StatusNotModified)
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	return c.Blob(http.StatusOK, a.contentType, a.body)
}
