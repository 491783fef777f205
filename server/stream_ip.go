package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/ipowner"
)

// The address stream (docs/ip.md, "A mirror of address ownership"): who holds
// each address, as a snapshot, SYNCED, then each change, for an agent
// that keeps a local map instead of asking per lookup. It rides the event
// streams' transports: its own route as a WebSocket or Server-Sent
// Events, and the multiplexed socket's subscribe with resource
// cache.AddressStream.

// ipWatchParams are the query parameters of the address stream.
var ipWatchParams = []string{"kinds", "node", "resourceVersion"}

// watchAddresses serves the address stream: a WebSocket when the request
// is an upgrade, else Server-Sent Events.
func (s *Server) watchAddresses(c echo.Context) error {
	q, err := queryParams(c, ipWatchParams...)
	if err != nil {
		return err
	}
	aq := addressWatchQuery(q.Get("kinds"), q.Get("node"), q.Get("resourceVersion"))
	aq.QueueSize = s.streams.opts.QueueSize
	if err := s.accessFor(c).restrictAddresses(&aq); err != nil {
		return err
	}
	req := c.Request()
	switch {
	case websocket.IsWebSocketUpgrade(req):
		ws, err := s.openAddressSocket(c, aq)
		if err != nil {
			return ignoreHijacked(err)
		}
		ws.run()
		return nil
	case acceptsEventStream(req):
		// An EventSource reconnecting sends the last id it saw: resume there.
		if id := req.Header.Get("Last-Event-ID"); id != "" {
			aq.ResourceVersion = id
		}
		return s.addressSSE(c, aq)
	}
	return fmt.Errorf("%w: the address stream is a stream: open it as a WebSocket (an Upgrade: websocket request), "+
		"or as Server-Sent Events with the header Accept: text/event-stream "+
		"(curl -N -H 'Accept: text/event-stream' '%s')", errBadRequest, req.URL.RequestURI())
}

// addressWatchQuery builds the stream's query from the parameters a URL or
// a subscribe message gives as strings; the cache checks them.
func addressWatchQuery(kinds, node, resourceVersion string) cache.AddressWatchQuery {
	q := cache.AddressWatchQuery{Node: node, ResourceVersion: resourceVersion}
	if kinds != "" {
		for k := range strings.SplitSeq(kinds, ",") {
			q.Kinds = append(q.Kinds, strings.TrimSpace(k))
		}
	}
	return q
}

func (s *Server) subscribeAddresses(q cache.AddressWatchQuery) (cache.Subscription, chan struct{}, error) {
	notify := make(chan struct{}, 1)
	sub, err := s.streams.admit(func() (cache.Subscription, error) { return s.r.WatchAddresses(q, notify) })
	return sub, notify, err
}

// addressSSE is watchSSE for the address stream.
func (s *Server) addressSSE(c echo.Context, q cache.AddressWatchQuery) error {
	sub, notify, err := s.subscribeAddresses(q)
	if err != nil {
		return err
	}
	defer s.unsubscribe(sub)
	out, done := s.beginSSE(c)
	defer done()
	life := s.startLife(c, 0, nil)
	defer life.stop()
	if err := s.pump(c.Request().Context(), sub, notify, out, life); err != nil {
		s.log.Debug("address stream ended", "err", err)
	}
	return nil
}

// openAddressSocket is openWatchSocket for the address stream.
func (s *Server) openAddressSocket(c echo.Context, q cache.AddressWatchQuery) (*wsConn, error) {
	sub, notify, err := s.subscribeAddresses(q)
	if err != nil {
		return nil, err
	}
	ws, err := s.openSocket(c, nil, false, notify)
	if err != nil {
		s.unsubscribe(sub)
		return nil, err
	}
	ws.add("", sub)
	return ws, nil
}

// restrictAddresses keeps, of each kind that holds addresses, the owners
// the caller may watch: all of them when allowed cluster-wide, else those
// of the namespaces where it is allowed (fixed for the stream's life, as
// for any stream; only the namespaces where RBAC might allow it are asked
// about, as for a stream of one resource: knownNamespaces), else none of
// that kind, silently, as an IP lookup
// leaves out the holders the caller may not list. A caller who may watch
// none of them is refused.
func (a access) restrictAddresses(q *cache.AddressWatchQuery) error {
	if !a.s.authorizing() {
		return nil
	}
	if err := q.Check(); err != nil {
		return err // a 400 before any review
	}
	asked := q.Kinds
	if len(asked) == 0 {
		for _, k := range ipowner.Kinds {
			asked = append(asked, k.Plural())
		}
	}
	var kinds []string
	for _, kind := range asked {
		res, err := a.s.r.Resolve(kind)
		if err != nil || res.Group != "" || res.Plural != kind {
			if len(q.Kinds) > 0 {
				kinds = append(kinds, kind) // not cached, or not a kind: the cache says why
			}
			continue
		}
		all, err := a.decide(auth.Attributes{Verb: auth.VerbWatch, Resource: res.Plural})
		if err != nil {
			return err
		}
		if all {
			kinds = append(kinds, kind)
			continue
		}
		if !res.Namespaced {
			continue
		}
		allowed, err := a.namespacesAllowed(auth.VerbWatch, res, a.knownNamespaces(auth.VerbWatch, res))
		if err != nil {
			return err
		}
		if len(allowed) > 0 {
			kinds = append(kinds, kind)
			if q.Namespaces == nil {
				q.Namespaces = map[string][]string{}
			}
			q.Namespaces[kind] = allowed
		}
	}
	if len(kinds) == 0 {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf(
			"forbidden: User %q cannot watch pods, services or nodes in any namespace: the address stream would be empty", a.userName()))
	}
	q.Kinds = kinds
	return nil
}

// subscribeAddresses adds an address stream to a multiplexed socket; a
// refusal is answered with an ERROR message.
func (w *wsConn) subscribeAddresses(id string, q cache.AddressWatchQuery) error {
	err := w.checkNewSubscription(id)
	if err == nil {
		q.QueueSize = w.opts.QueueSize
		var sub cache.Subscription
		sub, err = w.hub.admit(func() (cache.Subscription, error) { return w.r.WatchAddresses(q, w.wake) })
		if err == nil {
			w.add(id, sub)
			return nil
		}
	}
	return w.sendRaw(errorMessage(id, err))
}
