package server

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
)

// edge is the server's one middleware. Echo rebuilds its middleware chain
// on every request, one closure per middleware, so the steps are plain
// calls, in this order: panic recovery (outermost, so that a panic costs
// one request and is counted as its 500), metrics (which count every
// answer, refusals included), whole-cache freshness for the routes that do
// not set their own, then the guard: security headers, no body,
// authentication, limits.
func (s *Server) edge(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		start := time.Now()
		rt := s.routeOf(c)
		stream := rt.isStream(c.Request())
		defer func() {
			if p := recover(); p != nil {
				err = s.recovered(c, p)
			}
			s.metrics.observe(c, rt, stream, start, err)
		}()
		if rt.freshness == cacheFreshness {
			c.Response().Before(func() { s.fillFreshness(c) })
		}
		return s.guard(c, rt, stream, next, start)
	}
}

// recovered turns a handler's panic into an internal error, logged with
// its stack; the error translation answers it without internals.
func (s *Server) recovered(c echo.Context, p any) error {
	if p == http.ErrAbortHandler {
		panic(p) // net/http's way to abort a response: not ours to stop
	}
	err, ok := p.(error)
	if !ok {
		err = fmt.Errorf("%v", p)
	}
	s.log.Error("panic in handler", "path", c.Request().URL.Path, "err", err, "stack", string(debug.Stack()))
	return err
}
