package cache

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/internal/rowops"
	"github.com/kubeindex/kubeindex/query"
)

// Window is one live window: a Subscription whose messages are WINDOW
// and WINDOW_CHANGES (window.go). It is never queued for: each message is
// the difference between the rows it last sent and its view's rows when
// Next is called, so a consumer slow to call it gets fewer, larger
// differences, and it holds no backlog.
//
// Next and Scroll are called from one goroutine at a time; Close is safe
// from any goroutine and may be called more than once.
type Window struct {
	w          *windows
	v          *view
	k          *counts // nil: it asks for none
	notify     chan<- struct{}
	proj       *query.Projection
	fieldsText string
	groupText  string
	question   string // what a resume must ask again
	closed     atomic.Bool

	mu     sync.Mutex // the consumer's state, against a Close from elsewhere
	id     string
	offset int
	limit  int
	full   bool       // the next message is a WINDOW
	from   *sentState // a resume: the next message is the changes since this
	pub    uint64     // the view's publish the last message saw
	seq    uint64     // messages sent
	sent   []sentState
	done   bool
}

var _ Subscription = (*Window)(nil)

// sentState is what a message left the client with.
type sentState struct {
	seq    uint64
	pub    uint64 // the view's publish its rows are of
	rows   []*vrow
	total  int
	counts []byte
}

// resume continues from token when the window it names is parked with
// the same question and page, and the message it names is kept.
func (w *Window) resume(token string) {
	w.id = newWindowID()
	if token == "" {
		return
	}
	id, seq, ok := parseResumeToken(token)
	if !ok {
		return
	}
	p := w.w.unpark(id)
	if p == nil || p.question != w.question || p.offset != w.offset || p.limit != w.limit {
		return
	}
	w.id, w.seq, w.sent = id, p.seq, p.sent
	for i := range w.sent {
		if w.sent[i].seq == seq {
			w.from, w.full = &w.sent[i], false
		}
	}
}

// Scroll moves the window to offset, with limit rows (0: as many as
// now); the next message is a WINDOW.
func (w *Window) Scroll(offset, limit int) error {
	if limit == 0 {
		w.mu.Lock()
		limit = w.limit
		w.mu.Unlock()
	}
	q := WindowQuery{Ask: w.v.ask, Offset: offset, Limit: limit}
	if err := checkWindow(&q); err != nil {
		return err
	}
	w.mu.Lock()
	w.offset, w.limit, w.full, w.from = q.Offset, q.Limit, true, nil
	w.mu.Unlock()
	signal(w.notify)
	return nil
}

// Next is Subscription.Next.
func (w *Window) Next() (Message, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return Message{}, false
	}
	if why := w.ended(); why != nil {
		w.done = true
		return Message{Type: ResyncRequired, Reason: *why}, true
	}
	v := w.v
	v.mu.RLock()
	if !v.ready || v.pub == 0 || !w.full && w.from == nil && v.pub == w.pub {
		v.mu.RUnlock()
		return Message{}, false
	}
	counts, counted := v.pubCounts[w.k]
	if w.k != nil && !counted {
		v.mu.RUnlock() // being made (counts.open): a publish follows
		return Message{}, false
	}
	pubAt := time.Time{}
	if v.pub > w.pub && w.pub > 0 && v.pub-w.pub < uint64(len(v.pubAt)) {
		pubAt = v.pubAt[(w.pub+1)%uint64(len(v.pubAt))]
	}
	pub, rows, fz, total := v.pub, v.pubRows, v.pubFollow, v.pubTotal
	v.mu.RUnlock()
	from := w.pub
	w.pub = pub
	now := sentState{pub: pub, rows: v.page(pub, rows, fz, w.offset, w.limit), total: total, counts: counts}

	var b []byte
	typ := WindowChanges
	switch {
	case w.full:
		typ = WindowFull
		b = w.appendFull(now)
	case w.from != nil:
		b = w.appendChanges(*w.from, now, true)
	default:
		last := w.sent[len(w.sent)-1]
		if last.pub == from { // every window that sent this page then sends the same
			b = v.changed(pub, changesKey{from: from, offset: w.offset, limit: w.limit, fields: w.fieldsText, group: w.groupText},
				func() []byte { return w.appendChanges(last, now, false) })
		} else {
			b = w.appendChanges(last, now, false)
		}
		if b == nil {
			return Message{}, false
		}
	}
	w.full, w.from = false, nil
	w.seq++
	now.seq = w.seq
	if len(w.sent) == WindowHistory {
		w.sent = append(w.sent[:0], w.sent[1:]...)
	}
	w.sent = append(w.sent, now)
	// b may be shared by the windows on this page: their own resume
	// follows it, and the frame writer copies both once.
	tail := append(jsonscan.AppendString([]byte(`,"resume":`), resumeToken(w.id, w.seq)), '}')
	return Message{Type: typ, raw: b, rawTail: tail, live: !pubAt.IsZero(), pub: pubAt}, true
}

// appendFull begins a WINDOW message (without its resume and closing
// brace).
func (w *Window) appendFull(now sentState) []byte {
	size := 128 + len(now.counts)
	for _, r := range now.rows {
		size += w.rowSize(r)
	}
	b := append(make([]byte, 0, size), `{"type":"`+string(WindowFull)+`","offset":`...)
	b = append(b, strconv.Itoa(w.offset)...)
	b = append(append(b, `,"total":`...), strconv.Itoa(now.total)...)
	b = append(b, `,"rows":[`...)
	for i, r := range now.rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = w.appendRow(b, r)
	}
	b = append(b, ']')
	if now.counts != nil {
		b = append(append(b, `,"counts":`...), now.counts...)
	}
	return b
}

// appendChanges begins a WINDOW_CHANGES message from the rows of prev to
// those of now; nil when nothing changed, unless always.
func (w *Window) appendChanges(prev, now sentState, always bool) []byte {
	ops := diffRows(prev.rows, now.rows)
	countsChanged := string(prev.counts) != string(now.counts)
	if len(ops) == 0 && prev.total == now.total && !countsChanged && !always {
		return nil
	}
	size := 128 + len(now.counts) + 48*len(ops)
	for _, op := range ops {
		if op.Kind != rowops.Remove {
			size += w.rowSize(now.rows[op.Row])
		}
	}
	b := append(make([]byte, 0, size), `{"type":"`+string(WindowChanges)+`","total":`...)
	b = append(b, strconv.Itoa(now.total)...)
	b = append(b, `,"ops":[`...)
	for i, op := range ops {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, `{"op":"`...), op.Kind.String()...), '"')
		switch op.Kind {
		case rowops.Move:
			b = append(append(append(append(b, `,"from":`...), strconv.Itoa(op.From)...), `,"to":`...), strconv.Itoa(op.To)...)
		default:
			b = append(append(b, `,"at":`...), strconv.Itoa(op.At)...)
		}
		if op.Kind != rowops.Remove {
			b = w.appendRow(append(b, `,"row":`...), now.rows[op.Row])
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if countsChanged && now.counts != nil {
		b = append(append(b, `,"counts":`...), now.counts...)
	}
	return b
}

// diffRows is the row operations from prev to cur: rows are the same row
// when they are the same object's (namespace/name), changed when they are
// not the same version.
func diffRows(prev, cur []*vrow) []rowops.Op {
	if len(prev) == len(cur) {
		same := true
		for i := range prev {
			if prev[i] != cur[i] {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	pk := make([]string, len(prev))
	for i, r := range prev {
		pk[i] = r.key
	}
	ck := make([]string, len(cur))
	for i, r := range cur {
		ck[i] = r.key
	}
	return rowops.Diff(pk, ck, func(i, j int) bool {
		return prev[i].o.resourceVersion != cur[j].o.resourceVersion || prev[i].o.uid != cur[j].o.uid
	})
}

// appendRow appends a row as sent.
func (w *Window) appendRow(b []byte, r *vrow) []byte { return append(b, w.row(r)...) }

func (w *Window) rowSize(r *vrow) int { return len(w.row(r)) }

// row is a row as sent: the object, or its projection (made once per
// version and shared by the windows with the same fields). Columns that
// print the moment (an age) are printed when the version is first sent.
func (w *Window) row(r *vrow) []byte {
	if w.proj == nil {
		return r.o.Raw()
	}
	if p := r.proj.Load(); p != nil && p.fields == w.fieldsText {
		return p.b
	}
	p := &rowBytes{fields: w.fieldsText, b: w.proj.At(time.Now()).Apply(nil, r.o.Raw())}
	r.proj.Store(p)
	return p.b
}

// ended is why the window's view or counts ended; nil while they last.
func (w *Window) ended() *string {
	if why := w.v.failed.Load(); why != nil {
		return why
	}
	if w.k != nil {
		return w.k.failed.Load()
	}
	return nil
}

// Expired is Subscription.Expired: a window never expires; a resume it
// cannot continue is answered with a WINDOW.
func (w *Window) Expired() (oldest uint64, ok bool) { return 0, false }

// Close is Subscription.Close: the window leaves its view and is parked
// for a resume.
func (w *Window) Close() {
	if w.closed.Swap(true) {
		return
	}
	w.w.leave(w)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sent) > 0 && w.ended() == nil {
		w.w.park(w.id, &parkedWindow{question: w.question, offset: w.offset, limit: w.limit, seq: w.seq, sent: w.sent})
	}
}
