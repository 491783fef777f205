package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/auth"
)

// AuthOptions decides who may read what. The zero value serves every
// request; see docs/security.md.
type AuthOptions struct {
	// Authenticator checks bearer tokens. nil: no bearer tokens; without
	// client certificates as identities (Options.TLS) either, no
	// authentication: every request is served.
	Authenticator auth.Authenticator
	// Authorizer decides what an authenticated caller may read, resource
	// by resource and namespace by namespace. nil: an authenticated caller
	// reads everything. It needs an Authenticator.
	Authorizer auth.Authorizer
	// Namespaces, with an Authorizer, narrows the namespaces asked about
	// for a restricted caller's list or stream across namespaces (and IP
	// lookup): only those it returns are asked about. nil: every
	// namespace that could hold an answer is asked about.
	Namespaces auth.NamespaceFinder
	// Timeout bounds authenticating and authorizing one request. Default
	// DefaultAuthTimeout.
	Timeout time.Duration
	// ClusterTimeout bounds one cluster's access reviews for its part of
	// an answer across clusters (ClusterPartContext), so that a cluster
	// whose API server hangs makes its own part a 503 rather than holding
	// the whole answer up for Timeout. Default DefaultClusterAuthTimeout;
	// never more than Timeout.
	ClusterTimeout time.Duration
}

// DefaultAuthTimeout is AuthOptions.Timeout's default.
const DefaultAuthTimeout = 10 * time.Second

// DefaultClusterAuthTimeout is AuthOptions.ClusterTimeout's default.
const DefaultClusterAuthTimeout = 2 * time.Second

func (o AuthOptions) withDefaults() AuthOptions {
	if o.Timeout <= 0 {
		o.Timeout = DefaultAuthTimeout
	}
	if o.ClusterTimeout <= 0 {
		o.ClusterTimeout = DefaultClusterAuthTimeout
	}
	o.ClusterTimeout = min(o.ClusterTimeout, o.Timeout)
	return o
}

// WebSocketTokenProtocol prefixes a Sec-WebSocket-Protocol entry carrying
// the bearer token, base64url-encoded without padding, as kube-apiserver
// accepts it: browsers cannot set an Authorization header on a WebSocket.
// WebSocketProtocol is the subprotocol the server then selects; a browser
// must offer it too, or it fails the handshake.
const (
	WebSocketTokenProtocol = "base64url.bearer.authorization.k8s.io."
	WebSocketProtocol      = "kubeindex"
	// accessTokenParam carries the token of a stream in its URL, for
	// EventSource, which can set no header at all.
	accessTokenParam = "access_token"
)

const userKey = "kubeindex.user"

// userOf returns the caller authenticated for this request; nil when
// authentication is off or the route is public.
func userOf(c echo.Context) *auth.User {
	u, _ := c.Get(userKey).(*auth.User)
	return u
}

// authenticating: callers must say who they are, with a bearer token or
// a client certificate.
func (s *Server) authenticating() bool {
	return s.opts.Auth.Authenticator != nil || s.opts.TLS.clientCerts()
}

// authenticate admits a request with a valid client certificate or bearer
// token, and remembers its user for authorization. Public routes pass
// without one. A verified client certificate counts first, as in the API
// server; a token is then not reviewed. Tokens travelling outside the
// Authorization header are removed from the request either way, so that
// nothing downstream sees, logs or echoes them.
func (s *Server) authenticate(c echo.Context, rt *route, stream bool) error {
	if !s.authenticating() || rt.authz == public {
		return nil
	}
	token, err := takeToken(c.Request(), stream)
	if err != nil {
		return s.unauthorized(c, err.Error())
	}
	u, certErr := s.certUser(c.Request())
	if u == nil {
		if u, err = s.authenticateToken(c, token, certErr); err != nil {
			return err
		}
		if stream {
			c.Set(tokenKey, token) // reviewed again while the stream is open (stream_life.go)
		}
	}
	c.Set(userKey, u)
	if rt.authz == nonResourceURL {
		return s.accessFor(c).allowPath(auth.VerbGet, rt.path)
	}
	return nil
}

// authenticateToken reviews a bearer token; certErr is why a client
// certificate presented did not count, said when there is no token.
func (s *Server) authenticateToken(c echo.Context, token string, certErr error) (*auth.User, error) {
	switch {
	case token == "" && certErr != nil:
		return nil, s.unauthorized(c, certErr.Error())
	case token == "" && s.opts.Auth.Authenticator == nil:
		return nil, s.unauthorized(c, "this server requires a client certificate signed by its client CA")
	case token == "" && s.opts.TLS.clientCerts():
		return nil, s.unauthorized(c, "this server requires a bearer token (send the header Authorization: Bearer <token>) or a client certificate")
	case token == "":
		return nil, s.unauthorized(c, "this server requires a bearer token: send the header Authorization: Bearer <token>")
	case s.opts.Auth.Authenticator == nil:
		return nil, s.unauthorized(c, "this server takes no bearer tokens: present a client certificate signed by its client CA")
	}
	ctx, cancel := context.WithTimeout(auth.WithClientAddr(c.Request().Context(), remoteHost(c.Request())), s.opts.Auth.Timeout)
	u, ok, err := s.opts.Auth.Authenticator.AuthenticateToken(ctx, token)
	cancel()
	switch {
	case errors.Is(err, auth.ErrTooManyReviews):
		c.Response().Header().Set("Retry-After", "1")
		return nil, echo.NewHTTPError(http.StatusTooManyRequests,
			"too many unknown bearer tokens from this address; known tokens are still answered, new ones later")
	case err != nil:
		s.log.Warn("authentication failed", "err", err)
		return nil, retryLater("the bearer token could not be checked (the API server did not answer); try again")
	case !ok:
		return nil, s.unauthorized(c, "the bearer token is not valid")
	}
	return u, nil
}

func (s *Server) unauthorized(c echo.Context, msg string) error {
	c.Response().Header().Set("WWW-Authenticate", `Bearer realm="kubeindex"`)
	return echo.NewHTTPError(http.StatusUnauthorized, "Unauthorized: "+msg)
}

var errTokenSources = errors.New("give the bearer token once, in one place")

// takeToken finds the bearer token: in the Authorization header; on a
// stream also in a Sec-WebSocket-Protocol entry or the access_token query
// parameter. Those two are removed from the request.
func takeToken(r *http.Request, stream bool) (string, error) {
	if len(r.Header.Values("Authorization")) > 1 {
		return "", errTokenSources // which one counts would be a guess
	}
	var tokens []string
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(h), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "", errors.New("only Bearer tokens are accepted in the Authorization header")
		}
		if tok = strings.TrimSpace(tok); tok != "" {
			tokens = append(tokens, tok)
		}
	}
	if protocols := r.Header.Values("Sec-WebSocket-Protocol"); stream && len(protocols) > 0 {
		var keep []string
		for _, list := range protocols {
			for p := range strings.SplitSeq(list, ",") {
				p = strings.TrimSpace(p)
				enc, isToken := strings.CutPrefix(p, WebSocketTokenProtocol)
				if !isToken {
					keep = append(keep, p)
					continue
				}
				tok, err := base64.RawURLEncoding.DecodeString(enc)
				if err != nil || len(tok) == 0 {
					return "", fmt.Errorf("the %s… WebSocket protocol entry must carry a base64url token without padding", WebSocketTokenProtocol)
				}
				tokens = append(tokens, string(tok))
			}
		}
		r.Header.Del("Sec-WebSocket-Protocol")
		if len(keep) > 0 {
			r.Header.Set("Sec-WebSocket-Protocol", strings.Join(keep, ", "))
		}
	}
	if stream && strings.Contains(r.URL.RawQuery, accessTokenParam) {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err == nil && q.Has(accessTokenParam) {
			tokens = append(tokens, q[accessTokenParam]...)
			q.Del(accessTokenParam)
			r.URL.RawQuery = q.Encode()
		}
	}
	switch len(tokens) {
	case 0:
		return "", nil
	case 1:
		return tokens[0], nil
	}
	return "", errTokenSources
}
