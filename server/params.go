package server

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/internal/text"
)

// maxLimit bounds one page. Larger requests are refused rather than silently
// truncated, so a client never mistakes a short page for the whole list.
const maxLimit = 100_000

// maxParamBytes bounds one query parameter's value: a real selector or
// value is far shorter, and a label selector's cost grows with its length
// times the objects it is matched against.
const maxParamBytes = 8 << 10

// repeatable are the query parameters that may be given more than once
// (each filter is ANDed with the others).
var repeatable = map[string]bool{"filter": true}

// queryParams checks that every query parameter is one the route knows: a
// misspelt labelSelector must not silently return everything.
func queryParams(c echo.Context, known ...string) (url.Values, error) {
	raw := c.Request().URL.RawQuery
	if raw == "" {
		return nil, nil // no parameters; a nil url.Values reads as empty
	}
	// echo drops malformed pairs silently: a mangled namespace=%zz would
	// list every namespace.
	if _, err := url.ParseQuery(raw); err != nil {
		return nil, fmt.Errorf("%w: malformed query string: %v", errBadRequest, text.Truncate(err.Error(), 120))
	}
	q := c.QueryParams()
	for k, v := range q {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("%w: unknown query parameter %q (known: %s)", errBadRequest, text.Truncate(k, 64), strings.Join(known, ", "))
		}
		if len(v) > 1 && !repeatable[k] {
			return nil, fmt.Errorf("%w: query parameter %q given %d times", errBadRequest, text.Truncate(k, 64), len(v))
		}
		for _, v := range v {
			if len(v) > maxParamBytes {
				return nil, fmt.Errorf("%w: query parameter %q is longer than %d bytes", errBadRequest, text.Truncate(k, 64), maxParamBytes)
			}
			if !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
				return nil, fmt.Errorf("%w: query parameter %q is not valid UTF-8 text (control characters included)", errBadRequest, text.Truncate(k, 64))
			}
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
