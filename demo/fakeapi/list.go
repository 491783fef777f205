package fakeapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// query holds the parameters of a list or watch request.
type query struct {
	ls        labels.Selector // nil selects everything
	fs        fields.Selector // nil selects everything
	limit     int64
	cont      *continueToken
	rv        uint64 // 0 when absent or "0"
	exact     bool   // resourceVersionMatch=Exact
	watch     bool
	bookmarks bool
	timeout   time.Duration
}

func parseQuery(r *resource, v url.Values) (*query, error) {
	q := &query{}
	var err error
	if s := v.Get("labelSelector"); s != "" {
		if q.ls, err = labels.Parse(s); err != nil {
			return nil, badRequest("unable to parse requirement: %v", err)
		}
	}
	if s := v.Get("fieldSelector"); s != "" {
		if q.fs, err = parseFieldSelector(r, s); err != nil {
			return nil, err
		}
	}
	if q.watch, err = boolParam(v, "watch"); err != nil {
		return nil, err
	}
	if q.bookmarks, err = boolParam(v, "allowWatchBookmarks"); err != nil {
		return nil, err
	}
	if v.Has("sendInitialEvents") {
		// The streaming "watch-list" protocol is not served: kubeindex
		// lists, then watches. A client that asks for it is told at once
		// rather than given a watch without its initial events.
		return nil, badRequest("sendInitialEvents is not supported: list, then watch from the list's resourceVersion")
	}
	if q.limit, err = intParam(v, "limit"); err != nil {
		return nil, err
	}
	secs, err := intParam(v, "timeoutSeconds")
	if err != nil {
		return nil, err
	}
	q.timeout = time.Duration(secs) * time.Second
	if s := v.Get("resourceVersion"); s != "" {
		if q.rv, err = strconv.ParseUint(s, 10, 64); err != nil {
			return nil, badRequest("invalid resourceVersion %q", s)
		}
	}
	switch m := v.Get("resourceVersionMatch"); m {
	case "", "NotOlderThan":
	case "Exact":
		q.exact = true
	default:
		return nil, badRequest("invalid resourceVersionMatch %q", m)
	}
	if s := v.Get("continue"); s != "" && !q.watch {
		if q.cont, err = decodeContinue(s); err != nil {
			return nil, err
		}
	}
	return q, nil
}

func parseFieldSelector(r *resource, s string) (fields.Selector, error) {
	fs, err := fields.ParseSelector(s)
	if err != nil {
		return nil, badRequest("invalid field selector: %v", err)
	}
	for _, req := range fs.Requirements() {
		if _, ok := r.fields[req.Field]; !ok && req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			return nil, badRequest("field label not supported: %s", req.Field)
		}
	}
	return fs, nil
}

func boolParam(v url.Values, name string) (bool, error) {
	s := v.Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badRequest("invalid %s %q", name, s)
	}
	return b, nil
}

func intParam(v url.Values, name string) (int64, error) {
	s := v.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("invalid %s %q", name, s)
	}
	return n, nil
}

// continueToken is the opaque position of the next page: the snapshot the
// first page was served from, and the last key served.
type continueToken struct {
	RV        uint64 `json:"rv"`
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"name"`
}

func (t continueToken) encode() string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (*continueToken, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	t := &continueToken{}
	if err != nil || json.Unmarshal(b, t) != nil || t.RV == 0 || t.Name == "" {
		return nil, badRequest("continue key is not valid")
	}
	return t, nil
}

// listPage is one page of a list, cut from one consistent snapshot.
type listPage struct {
	rv        uint64
	items     []*object
	cont      string
	remaining int64 // items after this page
}

// list selects a page. A continued list is served from the snapshot its
// first page came from, as etcd does; when that snapshot has left the
// history the answer is 410 Expired and the client must list again.
func (s *Server) list(p resourcePath, q *query) (*listPage, error) {
	s.mu.Lock()
	at := s.rv
	switch {
	case q.cont != nil:
		at = q.cont.RV
	case q.rv > s.rv:
		s.mu.Unlock()
		return nil, &apiError{code: http.StatusGatewayTimeout, reason: "Timeout",
			message: fmt.Sprintf("Too large resource version: %d, current: %d", q.rv, s.rv)}
	case q.exact && q.rv != 0:
		at = q.rv
	}
	objs, err := s.objectsAt(p.res, at)
	if err != nil {
		s.mu.Unlock()
		if q.cont != nil {
			err = &apiError{code: http.StatusGone, reason: "Expired", message: "The provided continue parameter is too old " +
				"to display a consistent list result. You can start a new list without the continue parameter."}
		}
		return nil, err
	}
	all := sorted(objs)
	s.mu.Unlock()

	var sel []*object
	for _, o := range all {
		if p.namespace != "" && o.namespace != p.namespace || !o.matches(q.ls, q.fs) {
			continue
		}
		if q.cont != nil && !(key{q.cont.Namespace, q.cont.Name}).less(o.key()) {
			continue
		}
		sel = append(sel, o)
	}
	page := &listPage{rv: at, items: sel}
	if q.limit > 0 && int64(len(sel)) > q.limit {
		last := sel[q.limit-1]
		page.items = sel[:q.limit]
		page.cont = continueToken{RV: at, Namespace: last.namespace, Name: last.name}.encode()
		page.remaining = int64(len(sel)) - q.limit
	}
	return page, nil
}

// serveList writes a list in the API server's typed-list shape: items
// without apiVersion and kind.
func (s *Server) serveList(w http.ResponseWriter, p resourcePath, q *query) {
	page, err := s.list(p, q)
	if err != nil {
		writeError(w, err)
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"kind":"%sList","apiVersion":%q,"metadata":{"resourceVersion":"%d"`, p.res.kind, p.res.apiVersion(), page.rv)
	if page.cont != "" {
		fmt.Fprintf(&b, `,"continue":%q`, page.cont)
		if q.ls == nil && q.fs == nil {
			fmt.Fprintf(&b, `,"remainingItemCount":%d`, page.remaining)
		}
	}
	b.WriteString(`},"items":[`)
	for i, o := range page.items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(o.body)
	}
	b.WriteString("]}")
	writeBytes(w, http.StatusOK, b.Bytes())
}
