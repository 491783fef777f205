package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/indexers"
)

// ListMeta is the metadata of list-shaped responses, as in Kubernetes.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion"`
	Continue        string `json:"continue,omitempty"`
	Remaining       int    `json:"remainingItemCount,omitempty"`
	// Total is the number of matches of a list, on every page; nil where
	// no list is answered.
	Total *int `json:"totalItemCount,omitempty"`
}

// IndexValuesResponse is the body of GET /api/v1/resources/{r}/indexes/{i}.
type IndexValuesResponse struct {
	Kind     string             `json:"kind"`
	Resource string             `json:"resource"`
	Index    indexers.Spec      `json:"index"`
	Metadata ListMeta           `json:"metadata"`
	Values   []cache.IndexValue `json:"values"`
}

// jsonContentType is the shared value of Content-Type (see headers.go).
var jsonContentType = []string{"application/json"}

// writeJSON answers 200 with a whole JSON body, every header set before
// the status is written, its length included: without it, net/http
// chunks any body past 2 KiB, which costs both ends a framing pass and the
// client a read of the closing chunk.
func writeJSON(w http.ResponseWriter, body []byte) error {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = contentLength(len(body))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(body)
	return err
}

// writeObject is writeJSON for a stored object's bytes, which never
// change. On a connection that holds the answer (limitedConn.hold), the
// headers leave net/http's buffers first, so that the body reaches the
// connection in one write, which keeps a reference to it rather than a
// copy (lend): net/http would otherwise copy it into its 4 KiB buffer and
// the connection again into what it holds.
func writeObject(c echo.Context, raw []byte) error {
	c.Response().Header()["Content-Type"] = jsonContentType
	return writeLent(c.Response(), heldConn(c), raw, nil)
}

// writeStored is writeObject for a stored object. One held in pieces
// (cache.Object.Chunked) is lent to the connection as its pieces
// (writePieces), which it sends as they are in one write: net/http's
// writer takes a body in one slice, and joining the pieces into one was
// a copy of every answer's bytes.
func writeStored(c echo.Context, o *cache.Object) error {
	if !o.Chunked() {
		return writeObject(c, o.Raw())
	}
	c.Response().Header()["Content-Type"] = jsonContentType
	ps := pieceLists.Get().(*[][]byte)
	*ps = o.Pieces(append((*ps)[:0], nil)) // the first place is the connection's (sendHeld)
	return writePieces(c.Response(), heldConn(c), o.Len(), ps)
}

// writePieces answers 200 with the n bytes of (*pieces)[1:], which do not
// change (a stored object's), lent to lc (nil: none holds the answer)
// when it takes them (lendPieces), else joined and written. pieces is
// then the connection's, or returned here.
func writePieces(w http.ResponseWriter, lc *limitedConn, n int, pieces *[][]byte) error {
	if startLent(w, lc, n) {
		if marker := lc.lendPieces(n, pieces); marker != nil {
			_, err := w.Write(marker)
			return err
		}
	}
	b := answerBuffers.Get().(*[]byte)
	for _, p := range (*pieces)[1:] {
		*b = append(*b, p...)
	}
	putPieceList(pieces)
	_, err := w.Write(*b) // copied or sent before it returns
	putAnswerBuffer(b)
	return err
}

// heldConn is the connection that holds c's answer (limitedConn.hold);
// nil when none does (HTTP/2, streams, tests' recorders).
func heldConn(c echo.Context) *limitedConn {
	if lc := connOf(c.Request()); lc != nil && lc.holding() {
		return lc
	}
	return nil
}

// writeLent answers 200 with body, which does not change until the answer
// is sent, and which lc (nil: none holds the answer) is lent (see
// writeObject). pooled, if not nil, is body's answer buffer, which lc then
// owns; unless lc took it, it is returned once written.
func writeLent(w http.ResponseWriter, lc *limitedConn, body []byte, pooled *[]byte) error {
	if startLent(w, lc, len(body)) && lc.lend(body, pooled) {
		pooled = nil // the connection's now
	}
	_, err := w.Write(body)
	putAnswerBuffer(pooled)
	return err
}

// startLent answers 200 with a body of n bytes (JSON unless a
// Content-Type is set), and reports whether lc (nil: none holds the
// answer) may be lent the body: its headers have left net/http's
// buffers (flushHeaders).
func startLent(w http.ResponseWriter, lc *limitedConn, n int) bool {
	h := w.Header()
	if h.Get("Content-Type") == "" {
		h["Content-Type"] = jsonContentType
	}
	h["Content-Length"] = contentLength(n)
	w.WriteHeader(http.StatusOK)
	return lc != nil && flushHeaders(w)
}

// flushHeaders sends the headers of an answer whose length is set (so it
// is not chunked) out of net/http's buffers.
func flushHeaders(w http.ResponseWriter) bool {
	if r, ok := w.(*echo.Response); ok {
		w = r.Writer
	}
	f, ok := w.(http.Flusher)
	if ok {
		f.Flush()
	}
	return ok
}

// answerBuffers hold list-shaped answers that fit envelopeFit, whole, so
// that a connection can be lent them (writeLentEnvelope).
var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, envelopeFit); return &b }}

// envelopeFit is the longest answer written with its length; a longer one
// is streamed, chunked.
const envelopeFit = 32 << 10

func putAnswerBuffer(b *[]byte) {
	if b != nil && cap(*b) <= envelopeFit {
		*b = (*b)[:0]
		answerBuffers.Put(b)
	}
}

// writeList writes a Kubernetes-style list envelope around the stored
// object bytes, without decoding or re-encoding any object.
func writeList(w http.ResponseWriter, lc *limitedConn, res cache.ListResult) error {
	return writeListAs(w, lc, res, nil)
}

// writeListAs is writeList with each object written by enc (as stored
// when enc is nil).
func writeListAs(w http.ResponseWriter, lc *limitedConn, res cache.ListResult, enc itemEncoding) error {
	total := res.Total
	meta, err := json.Marshal(ListMeta{ResourceVersion: res.Freshness.ResourceVersion,
		Continue: res.Continue, Remaining: res.Remaining, Total: &total})
	if err != nil {
		return err
	}
	head, err := json.Marshal(struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}{res.Resource.Kind + "List", res.Resource.APIVersion()})
	if err != nil {
		return err
	}
	head = append(head[:len(head)-1], `,"metadata":`...)
	head = append(head, meta...)
	return writeEnvelopeAs(w, lc, res.Items, func(b []byte) []byte { return append(b, head...) }, enc)
}

// writeIPLookup writes the answer to "who has this IP": a summary a service
// can act on (match, pods) and the full pod objects. The summary is encoded
// by hand, as encoding/json would encode it (TestIPLookupEncoding): this is
// the hot path, and reflection was a large part of its cost.
func writeIPLookup(w http.ResponseWriter, lc *limitedConn, res cache.IPLookup) error {
	items := res.Items
	if len(res.ServiceItems)+len(res.NodeItems) > 0 {
		items = append(append(append([]*cache.Object(nil), res.Items...), res.ServiceItems...), res.NodeItems...)
	}
	return writeEnvelope(w, lc, items, func(b []byte) []byte { return appendIPLookupHead(b, res) })
}

// envelopeBuffers are the write buffers of list-shaped answers. A buffer
// holds many objects, so that a long list goes out in few large writes.
var envelopeBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, envelopeFit) }}

// writeEnvelope answers 200 with the JSON object that head appends the
// start of, the objects as its member "items", and the closing brace and
// a newline. head appends to the write buffer itself, so that it costs no
// buffer of its own; the objects' bytes are written as stored. An answer
// that fits the buffer (a lookup's, a short list's) goes out in one write
// with its length (see writeJSON); a longer one is streamed, chunked.
func writeEnvelope(w http.ResponseWriter, lc *limitedConn, items []*cache.Object, head func([]byte) []byte) error {
	return writeEnvelopeAs(w, lc, items, head, nil)
}

// appendEnvelope is the envelope of writeEnvelope in an answer buffer;
// nil when it does not fit envelopeFit.
func appendEnvelope(items []*cache.Object, head func([]byte) []byte) *[]byte {
	size := len(`,"items":[`) + len("]}\n") + max(len(items)-1, 0)
	for _, o := range items {
		if size += o.Len(); size > envelopeFit {
			return nil
		}
	}
	b := answerBuffers.Get().(*[]byte)
	buf := head((*b)[:0])
	if len(buf)+size > envelopeFit {
		putAnswerBuffer(b)
		return nil
	}
	buf = append(buf, `,"items":[`...)
	for i, o := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = o.AppendTo(buf)
	}
	*b = append(buf, "]}\n"...)
	return b
}

// itemEncoding writes the objects of a list otherwise than as stored.
type itemEncoding interface {
	// size is the length of what write writes for o; -1 when it is not
	// known beforehand (the answer is then streamed without a length).
	size(o *cache.Object) int
	write(bw *bufio.Writer, o *cache.Object)
}

// writeEnvelopeAs is writeEnvelope with each object written by enc (as
// stored when enc is nil).
func writeEnvelopeAs(w http.ResponseWriter, lc *limitedConn, items []*cache.Object, head func([]byte) []byte, enc itemEncoding) error {
	if lc != nil && enc == nil {
		if b := appendEnvelope(items, head); b != nil {
			return writeLent(w, lc, *b, b)
		}
	}
	bw := envelopeBuffers.Get().(*bufio.Writer)
	defer envelopeBuffers.Put(bw)
	bw.Reset(w)
	defer bw.Reset(nil) // the pool keeps no response writer
	start := head(bw.AvailableBuffer())
	size := len(start) + len(`,"items":[`) + len("]}\n") + max(len(items)-1, 0)
	for _, o := range items {
		if enc == nil {
			size += o.Len()
		} else if n := enc.size(o); n >= 0 && size >= 0 {
			size += n
		} else {
			size = -1
		}
		if size > bw.Size() || size < 0 {
			break // streamed: the length is not needed
		}
	}
	h := w.Header()
	if h.Get("Content-Type") == "" {
		h["Content-Type"] = jsonContentType
	}
	if size >= 0 && size <= bw.Size() {
		h["Content-Length"] = contentLength(size)
	}
	w.WriteHeader(http.StatusOK)
	bw.Write(start)
	bw.WriteString(`,"items":[`)
	for i, o := range items {
		if i > 0 {
			bw.WriteByte(',')
		}
		if enc == nil {
			o.WriteTo(bw)
		} else {
			enc.write(bw, o)
		}
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}
