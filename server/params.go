package server

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// maxLimit bounds one page. Larger requests are refused rather than silently
// truncated, so a client never mistakes a short page for the whole list.
const maxLimit = 100_000

// queryParams checks that every query parameter is one the route knows: a
// misspelt labelSelector must not silently return everything.
func queryParams(c echo.Context, known ...string) (url.Values, error) {
	q := c.QueryParams()
	for k, v := range q {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("%w: unknown query parameter %q (known: %s)", errBadRequest, k, strings.Join(known, ", "))
		}
		if len(v) > 1 {
			return nil, fmt.Errorf("%w: query parameter %q given %d times", errBadRequest, k, len(v))
		}
	}
	return q, nil
}

func parseLimit(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: limit must be a non-negative integer, got %q", errBadRequest, s)
	}
	if n > maxLimit {
		return 0, fmt.Errorf("%w: limit %d is above the maximum of %d", errBadRequest, n, maxLimit)
	}
	return n, nil
}

// pathParam returns a path parameter unescaped (echo hands them over raw).
func pathParam(c echo.Context, name string) (string, error) {
	v, err := url.PathUnescape(c.Param(name))
	if err != nil || v == "" {
		return "", fmt.Errorf("%w: path parameter %s is malformed", errBadRequest, name)
	}
	return v, nil
}
