package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubeindex/kubeindex/query"
)

// Live windows (docs/streams.md, "Live windows"): a page of a question's
// answer, its total and its counts, kept current. Windows asking the same
// question share one view (window_view.go), an ordered set of its matches
// fed by a broker subscription; windows asking the same counts of the
// same selection and filter share them (window_counts.go), which hold
// no rows; each window (window_sub.go) sends, at most Rate times a
// second, the row operations between the rows it last sent and the
// rows now, and its counts when they changed.

// Window limits and defaults.
const (
	// DefaultWindowRate is how many messages a second a window sends at
	// most, when WindowQuery.Rate is 0.
	DefaultWindowRate = 5
	// MaxWindowRate bounds WindowQuery.Rate.
	MaxWindowRate = 50
	// DefaultWindowLimit is a window's rows when WindowQuery.Limit is 0;
	// MaxWindowLimit bounds it.
	DefaultWindowLimit = 100
	MaxWindowLimit     = 500
	// MaxWindowOffset bounds WindowQuery.Offset.
	MaxWindowOffset = 10_000_000
	// ParkedWindows is how many closed windows are kept for a resume, each
	// for ParkedWindowAge, with their last WindowHistory messages.
	ParkedWindows   = 4096
	ParkedWindowAge = 5 * time.Minute
	WindowHistory   = 4
	// MaxViewRows bounds the rows every view holds together.
	MaxViewRows = 4_000_000
	// viewLinger is how long a view no window uses is kept, so that
	// windows coming back (a reload, a reconnect) find it built.
	viewLinger = time.Minute
)

// Messages of a live window.
const (
	// WindowFull is a window's whole page: its first message, and the
	// answer to a scroll or to a resume that cannot be continued.
	WindowFull MessageType = "WINDOW"
	// WindowChanges is the row operations, total and counts since the
	// window's last message.
	WindowChanges MessageType = "WINDOW_CHANGES"
)

// WindowQuery is a live window: a question (selection, filter, sort) and
// the part of its answer shown, with what is sent of it.
type WindowQuery struct {
	Namespace string
	// Namespaces, when not nil, confines the window to these namespaces
	// (see ListQuery.Namespaces): rows, total and counts alike.
	Namespaces    []string
	LabelSelector string
	// Fields is a field selector (see ListQuery.Fields), FieldSelector
	// its text, which tells questions apart.
	Fields        fields.Selector
	FieldSelector string
	// Ask is the filter and sort; its Offset is not used. Required.
	Ask *Ask
	// Offset and Limit are the rows shown (0: DefaultWindowLimit).
	Offset, Limit int
	// Projection, when not nil, is what of each row is sent (FieldsText
	// its text); nil sends whole objects.
	Projection *query.Projection
	FieldsText string
	// GroupBy are the keys of the counts sent (none: no counts).
	GroupBy []query.Key
	// Resume is a token of an earlier window's message: continue from
	// the rows it left, if kept.
	Resume string
	// Rate is the most messages a second (0: DefaultWindowRate); the
	// first window of a view sets its pace.
	Rate float64
}

// windows is the cache's views and the windows kept for a resume.
type windows struct {
	ctx atomic.Pointer[context.Context] // set by Start; views stop with it

	mu     sync.Mutex
	views  map[string]*view   // by question (viewKey)
	counts map[string]*counts // by question and keys (countsKey)
	rows   int                // the rows the views held when built
	parked map[string]*parkedWindow
}

func newWindows() *windows {
	return &windows{views: map[string]*view{}, counts: map[string]*counts{}, parked: map[string]*parkedWindow{}}
}

// parkedWindow is a closed window's state, for a resume.
type parkedWindow struct {
	question string
	offset   int
	limit    int
	seq      uint64
	sent     []sentState
	at       time.Time
}

// Window opens a live window over resource. Its messages are taken with
// Next as any subscription's (WINDOW, then WINDOW_CHANGES), notify is
// signalled when one may be ready; Close parks it for a resume.
//
// It returns ErrUnknownResource, ErrInvalid or a *query.Error for a bad
// query, ErrNotSynced, and ErrTooCostly or ErrBusy when the view the
// question needs would cost more than the budget allows now.
func (c *Cache) Window(resource string, q WindowQuery, notify chan<- struct{}) (*Window, error) {
	if err := checkWindow(&q); err != nil {
		return nil, err
	}
	r, err := c.resource(resource)
	if err != nil {
		return nil, err
	}
	ctxp := c.wins.ctx.Load()
	if ctxp == nil {
		return nil, fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
	}
	key := viewKey(r.res.Name, &q)
	w := &Window{w: c.wins, notify: notify, offset: q.Offset, limit: q.Limit, proj: q.Projection,
		fieldsText: q.FieldsText, groupText: groupText(q.GroupBy),
		question: key + "\x00" + q.FieldsText + "\x00" + groupText(q.GroupBy), full: true}
	v, err := c.joinView(*ctxp, r, key, &q, w)
	if err != nil {
		return nil, err
	}
	w.v = v
	if err := c.joinCounts(*ctxp, r, &q, w); err != nil {
		c.wins.leave(w)
		return nil, err
	}
	if len(q.GroupBy) > 0 {
		v.countsChanged(time.Time{}) // its next publish carries them, once made
	}
	w.resume(q.Resume)
	signal(notify)
	return w, nil
}

// checkWindow validates and defaults q.
func checkWindow(q *WindowQuery) error {
	if q.Ask == nil || q.Ask.Schema == nil {
		return fmt.Errorf("%w: a window needs a question", ErrInvalid)
	}
	if k, n, ok := q.Ask.Filter.Moving(); ok {
		if len(q.Ask.Filter) == 1 {
			n = 0 // one filter parameter: no occurrence to name
		}
		return &query.Error{Param: "filter", Nth: n, Msg: fmt.Sprintf("a window cannot filter on %s, whose truth changes with time and no event: "+
			"sort by age, or filter on metadata.creationTimestamp (compared as text, such as metadata.creationTimestamp>2026-01-01T00:00:00Z)", k)}
	}
	for _, s := range q.Ask.Sort {
		if s.Key.Moving() {
			return &query.Error{Param: "sort", Msg: fmt.Sprintf("a window cannot sort by %s, a date column printed as an age that changes with time and no event", s.Key)}
		}
	}
	for _, k := range q.GroupBy {
		if k.Moving() {
			return &query.Error{Param: "groupBy", Msg: fmt.Sprintf("a window cannot count by %s, a date column printed as an age that changes with time and no event", k)}
		}
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultWindowLimit
	case q.Limit < 0 || q.Limit > MaxWindowLimit:
		return fmt.Errorf("%w: limit must be from 1 to %d, got %d", ErrInvalid, MaxWindowLimit, q.Limit)
	}
	if q.Offset < 0 || q.Offset > MaxWindowOffset {
		return fmt.Errorf("%w: offset must be from 0 to %d, got %d", ErrInvalid, MaxWindowOffset, q.Offset)
	}
	switch {
	case q.Rate == 0:
		q.Rate = DefaultWindowRate
	case q.Rate < 0 || q.Rate > MaxWindowRate:
		return fmt.Errorf("%w: a window's rate must be above 0 and at most %d messages a second", ErrInvalid, MaxWindowRate)
	}
	return nil
}

// viewKey names a question: windows with the same one share a view,
// whatever counts they ask (window_counts.go).
func viewKey(resource string, q *WindowQuery) string {
	nss := "*"
	if q.Namespaces != nil {
		nss = strings.Join(slices.Sorted(slices.Values(q.Namespaces)), ",")
	}
	return strings.Join([]string{resource, q.Namespace, nss, q.LabelSelector, q.FieldSelector,
		q.Ask.FilterText, q.Ask.SortText, q.Ask.Schema.Fingerprint()}, "\x00")
}

func groupText(keys []query.Key) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return strings.Join(s, ",")
}

// joinView adds w to the view of key, built (within the budget) when
// there is none.
func (c *Cache) joinView(ctx context.Context, r *resourceCache, key string, q *WindowQuery, w *Window) (*view, error) {
	ws := c.wins
	ws.mu.Lock()
	defer ws.mu.Unlock()
	v := ws.views[key]
	if v == nil {
		var err error
		if v, err = c.newView(r, key, q); err != nil {
			return nil, err
		}
		if ws.rows+v.holds() > MaxViewRows {
			v.release()
			return nil, fmt.Errorf("%w: the live windows' views hold %d rows, and this question's would take them past %d: narrow it, or use a question other windows use", ErrBusy, ws.rows, MaxViewRows)
		}
		if err := v.open(); err != nil {
			v.release()
			return nil, err
		}
		ws.rows += v.holds()
		ws.views[key] = v
		go v.run(ctx)
	}
	v.windows++
	v.members = append(v.members, w)
	return v, nil
}

// leave removes w from its view and its counts.
func (ws *windows) leave(w *Window) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	v := w.v
	v.members = slices.DeleteFunc(v.members, func(m *Window) bool { return m == w })
	v.windows--
	if v.windows == 0 {
		v.idleSince = time.Now()
		signal(v.wake)
	}
	if k := w.k; k != nil {
		k.members = slices.DeleteFunc(k.members, func(m *Window) bool { return m == w })
		k.windows--
		if k.windows == 0 {
			k.idleSince = time.Now()
			signal(k.wake)
		}
	}
}

// drop removes v from the registry if no window uses it, or if it
// failed (its windows end); false if one joined meanwhile.
func (ws *windows) drop(v *view) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if v.windows > 0 && v.failed.Load() == nil {
		return false
	}
	if ws.views[v.key] == v {
		delete(ws.views, v.key)
		ws.rows -= v.holds()
	}
	return true
}

// notifies returns the wake-ups of v's windows.
func (ws *windows) notifies(v *view, dst []chan<- struct{}) []chan<- struct{} {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range v.members {
		dst = append(dst, w.notify)
	}
	return dst
}

// park keeps a closed window's state for a resume, dropping the oldest
// and those too old.
func (ws *windows) park(id string, p *parkedWindow) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	now := time.Now()
	if len(ws.parked) >= ParkedWindows {
		oldest := ""
		for k, pw := range ws.parked {
			if now.Sub(pw.at) > ParkedWindowAge {
				delete(ws.parked, k)
			} else if oldest == "" || pw.at.Before(ws.parked[oldest].at) {
				oldest = k
			}
		}
		if len(ws.parked) >= ParkedWindows {
			delete(ws.parked, oldest)
		}
	}
	p.at = now
	ws.parked[id] = p
}

// unpark takes a parked window's state, if kept and not too old.
func (ws *windows) unpark(id string) *parkedWindow {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	p := ws.parked[id]
	delete(ws.parked, id)
	if p == nil || time.Since(p.at) > ParkedWindowAge {
		return nil
	}
	return p
}

// newWindowID is a window's random name, which its resume tokens carry.
func newWindowID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// resumeToken is "<window id>.<message number>".
func resumeToken(id string, seq uint64) string { return id + "." + strconv.FormatUint(seq, 10) }

func parseResumeToken(t string) (id string, seq uint64, ok bool) {
	id, n, ok := strings.Cut(t, ".")
	if !ok || id == "" {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	return id, seq, err == nil
}

// signal wakes a consumer without blocking.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
