package server

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/internal/text"
)

// HostOptions decide which Host header values are served while
// authentication is off. A page on attacker.example can rebind its name to
// 127.0.0.1 and have a browser read whatever answers there: the browser
// then sends Host: attacker.example, which names no server of ours. A
// rebinding always carries the attacker's name, never an IP literal, since
// the browser's origin is the name it looked up.
type HostOptions struct {
	// AcceptHosts are names served besides loopback addresses and
	// localhost, compared without case or port ("*": every name; the check
	// is then off).
	AcceptHosts []string
	// AcceptIPs serves any IP literal, not only loopback addresses: for a
	// server other hosts reach by address (--allow-unauthenticated-remote).
	AcceptIPs bool
}

// hostRefusedKey marks a request refused for its Host.
const hostRefusedKey = "kubeindex.hostRefused"

// checkHost refuses a request whose Host is not ours while nothing else
// stands between a browser page and the cache (authentication is off).
func (s *Server) checkHost(c echo.Context) error {
	if s.authenticating() || s.opts.Hosts.accepts(c.Request().Host) {
		return nil
	}
	c.Set(hostRefusedKey, true) // its answer carries no freshness (fillFreshness)
	return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf(
		"the Host %q is not served: with authentication off, kubeindex answers loopback addresses and localhost only; "+
			"to serve this name, add it with --accept-hosts", text.Truncate(c.Request().Host, 64)))
}

func (o HostOptions) accepts(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || o.AcceptIPs
	}
	for _, name := range o.AcceptHosts {
		if name == "*" || strings.EqualFold(name, host) {
			return true
		}
	}
	return false
}
