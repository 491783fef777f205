package server

import (
	"fmt"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
)

// streamAccess is the caller's access for the life of a multiplexed
// socket: bound to the server's stream context, not to the request's echo
// Context, which must not outlive the handler. nil when not authorizing.
func (s *Server) streamAccess(c echo.Context) *access {
	if !s.authorizing() {
		return nil
	}
	return &access{s: s, ctx: s.streams.ctx, user: userOf(c)}
}

// authorize checks a subscribe message on the reader goroutine, so that
// a slow review holds up this socket's reading, never its writer (pings,
// other subscriptions' events). The socket's token is reviewed again
// first (through the cache): one no longer valid is refused with 401 and
// ends the socket. A refusal becomes the ERROR answer to the message (401,
// or 403 Forbidden); an allowed one carries its namespace scope.
func (w *wsConn) authorize(cmd clientCmd) clientCmd {
	if cmd.err == nil && cmd.msg.Cluster != "" && !w.srv.fleetFront() {
		cmd.err = fmt.Errorf("%w: cluster is a field of a subscription on a fleet's root, across clusters; this socket is one cluster's", errBadRequest)
		return cmd
	}
	if cmd.err == nil && w.srv.fleetFront() && cmd.msg.Op == "window" {
		cmd.err = fmt.Errorf("%w: live windows are per cluster: open them on /clusters/{name}/api/v1/stream", errBadRequest)
		return cmd
	}
	if cmd.err == nil && cmd.msg.Op == "window" {
		return w.prepareWindow(cmd)
	}
	if cmd.err != nil || cmd.msg.Op != "subscribe" {
		return cmd
	}
	if cmd.err = w.life.authenticate(w.hub.ctx); cmd.err != nil {
		return cmd
	}
	if w.srv.fleetFront() {
		return w.prepareFleet(cmd)
	}
	if cmd.msg.Resource == cache.AddressStream {
		q := addressWatchQuery(cmd.msg.Kinds, cmd.msg.Node, cmd.msg.ResourceVersion)
		if w.access != nil {
			cmd.err = w.access.restrictAddresses(&q)
		}
		cmd.addresses = &q
		return cmd
	}
	if w.access == nil {
		return cmd
	}
	q, err := cmd.msg.watchQuery()
	if err == nil {
		err = w.access.restrictWatch(cmd.msg.Resource, &q)
	}
	cmd.err, cmd.namespaces = err, q.Namespaces
	return cmd
}
