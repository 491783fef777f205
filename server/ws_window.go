package server

import (
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/query"
)

// Live windows on the multiplexed socket (docs/streams.md, "Live
// windows"): the "window" op opens one (a cache.Window, a subscription
// like the others), "scroll" moves it, "unsubscribe" ends it.

// windowFields are a window's own members of a client message:
//
//	{"op":"window","id":"w1","resource":"pods","namespace":"…","labelSelector":"…","fieldSelector":"…",
//	 "filter":["status!=Running"],"sort":"-restarts","offset":0,"limit":100,"fields":"…","groupBy":"status,node","resume":"…"}
//	{"op":"scroll","id":"w1","offset":200,"limit":100}
type windowFields struct {
	FieldSelector string   `json:"fieldSelector"`
	Filter        []string `json:"filter"`
	Sort          string   `json:"sort"`
	Offset        *int     `json:"offset"`
	Limit         *int     `json:"limit"`
	Fields        string   `json:"fields"`
	GroupBy       string   `json:"groupBy"`
	Resume        string   `json:"resume"`
}

var windowFieldNames = []string{"fieldSelector", "filter", "sort", "offset", "limit", "fields", "groupBy", "resume"}

func (f *windowFields) given() bool {
	return f.FieldSelector != "" || f.Filter != nil || f.Sort != "" || f.Offset != nil || f.Limit != nil ||
		f.Fields != "" || f.GroupBy != "" || f.Resume != ""
}

// checkWindow refuses a window op with another stream's fields; the
// question itself is read by windowQuery.
func (m *clientMessage) checkWindow() error {
	switch {
	case m.Resource == "":
		return fmt.Errorf("%w: window needs a resource", errBadRequest)
	case m.Resource == cache.AddressStream:
		return fmt.Errorf("%w: resource: the address stream has no windows", errBadRequest)
	case m.Index != "" || m.Value != "" || m.ResourceVersion != "" || m.Snapshot != nil || m.Diff != "" || m.Kinds != "" || m.Node != "":
		return fmt.Errorf("%w: a window takes resource, namespace, labelSelector, %s; not index, value, resourceVersion, snapshot, diff, kinds or node",
			errBadRequest, strings.Join(windowFieldNames, ", "))
	}
	return nil
}

// checkScroll: a scroll takes an id, an offset and maybe a limit.
func (m *clientMessage) checkScroll() error {
	rest := *m
	rest.Op, rest.ID, rest.Offset, rest.Limit = "", "", nil, nil
	if m.Offset == nil || !rest.isZero() {
		return fmt.Errorf("%w: scroll takes op, id, offset and optionally limit", errBadRequest)
	}
	return nil
}

func (m *clientMessage) isZero() bool {
	return m.Op == "" && m.ID == "" && m.Resource == "" && m.Namespace == "" && m.LabelSelector == "" && m.Index == "" &&
		m.Value == "" && m.ResourceVersion == "" && m.Snapshot == nil && m.Diff == "" && m.Kinds == "" && m.Node == "" &&
		!m.windowFields.given()
}

// windowQuery reads a window op's question as the REST API reads a list's
// and the counts route's parameters, with the same errors, each naming
// its field.
func (s *Server) windowQuery(m *clientMessage) (cache.WindowQuery, error) {
	sc, err := s.schema(m.Resource)
	if err != nil {
		return cache.WindowQuery{}, err
	}
	ask, err := parseAsk(url.Values{"filter": m.Filter, "sort": {m.Sort}}, sc)
	if err != nil {
		return cache.WindowQuery{}, err
	}
	q := cache.WindowQuery{Namespace: m.Namespace, LabelSelector: m.LabelSelector, FieldSelector: m.FieldSelector,
		Ask: ask, FieldsText: m.Fields, Resume: m.Resume, Rate: s.streams.opts.WindowRate}
	if m.FieldSelector != "" {
		if q.Fields, err = fields.ParseSelector(m.FieldSelector); err != nil {
			return q, fmt.Errorf("%w: fieldSelector: %v", errBadRequest, text.Truncate(err.Error(), 200))
		}
	}
	if q.Projection, err = query.ParseFields(m.Fields); err != nil {
		return q, err
	}
	if q.GroupBy, err = sc.ParseKeys("groupBy", m.GroupBy, query.MaxGroupBy, false); err != nil {
		return q, err
	}
	if m.Offset != nil {
		q.Offset = *m.Offset
	}
	if m.Limit != nil {
		if *m.Limit <= 0 {
			return q, fmt.Errorf("%w: limit must be from 1 to %d, got %d", errBadRequest, cache.MaxWindowLimit, *m.Limit)
		}
		q.Limit = *m.Limit
	}
	return q, nil
}

// prepareWindow reads and authorizes a window op on the reader goroutine
// (see authorize): the caller's token is reviewed again, and the window
// is confined to the namespaces where the caller may list the resource,
// as a list is.
func (w *wsConn) prepareWindow(cmd clientCmd) clientCmd {
	if cmd.err = w.life.authenticate(w.hub.ctx); cmd.err != nil {
		return cmd
	}
	q, err := w.srv.windowQuery(&cmd.msg)
	if err == nil && w.access != nil {
		var res cache.Resource
		if res, err = w.r.Resolve(cmd.msg.Resource); err == nil {
			q.Namespaces, err = w.access.scope(auth.VerbList, res, q.Namespace)
		}
	}
	cmd.err, cmd.window = err, &q
	return cmd
}

// openWindow adds a window to the socket; a refusal is answered with an
// ERROR message.
func (w *wsConn) openWindow(id, resource string, q cache.WindowQuery) error {
	err := w.checkNewSubscription(id)
	if err == nil {
		var sub cache.Subscription
		sub, err = w.hub.admit(func() (cache.Subscription, error) {
			win, err := w.r.Window(resource, q, w.wake)
			if err != nil {
				return nil, err
			}
			return win, nil
		})
		if err == nil {
			w.add(id, sub)
			return nil
		}
	}
	return w.sendRaw(errorMessage(id, err))
}

// scrollWindow moves a window; it answers with a WINDOW, or an ERROR.
func (w *wsConn) scrollWindow(m clientMessage) error {
	i := w.find(m.ID)
	if i < 0 {
		return w.sendRaw(errorMessage(m.ID, fmt.Errorf("%w: no window %q", errBadRequest, text.Truncate(m.ID, 64))))
	}
	win, ok := w.subs[i].sub.(*cache.Window)
	if !ok {
		return w.sendRaw(errorMessage(m.ID, fmt.Errorf("%w: subscription %q is not a window", errBadRequest, text.Truncate(m.ID, 64))))
	}
	limit := 0
	if m.Limit != nil {
		if limit = *m.Limit; limit <= 0 {
			return w.sendRaw(errorMessage(m.ID, fmt.Errorf("%w: limit must be from 1 to %d, got %d", errBadRequest, cache.MaxWindowLimit, limit)))
		}
	}
	if err := win.Scroll(*m.Offset, limit); err != nil {
		return w.sendRaw(errorMessage(m.ID, err))
	}
	return nil
}
