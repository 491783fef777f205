package server

import (
	"bytes"
	"net/textproto"
	"strings"
	"sync/atomic"

	"github.com/labstack/echo/v4"
)

// Header lines written by the connection. An answer's security and
// freshness headers are the same for thousands of answers in a row, yet
// set in net/http's header map they cost every answer their map
// assignments, the map's growth past eight entries into a table, net/http's
// clone of it at WriteHeader, and sorting and writing it. On a plain
// HTTP/1.x connection (limitedConn, no TLS between) they are instead kept
// as lines rendered once (headLines), and the connection inserts them
// right after the answer's status line as net/http writes it (splice):
// the client reads the same headers, and the map holds only what the
// handler sets (Content-Type, Content-Length). Everywhere else (HTTP/2,
// TLS, streams, a cluster's answer recorded for a fleet, tests' recorders)
// they go in the header map as before; TestHeaderLinesAsTheMap holds the
// two ways to the same headers.
//
// Only headers that no handler sets in the map are kept as lines (a key
// in both would be sent twice): the security headers but Cache-Control,
// which handlers replace, and the X-Kubeindex freshness headers.

// headLines (under limitedConn.wmu) are the lines of the answer being
// served. Each place holds one header's line or lines, set as the header
// map's key would be: a later set replaces it, and nothing removes it.
type headLines struct {
	// on: the answer being served takes its lines from here (startLines);
	// off once the status line has left with them.
	on bool
	// fresh: a freshness was set (fillFreshness gives none then).
	fresh bool
	segs  [linePlaces][]byte
}

// The places of headLines.segs, in the order they are written.
const (
	lineSecurity = iota
	lineResourceVersion
	lineLastEvent
	lineState // synced, stale, watch
	lineSimulated
	linePlaces
)

// startLines starts (on) or ends the lines of the answer about to be
// served on c, with security as its security headers' lines.
func (c *limitedConn) startLines(on bool, security []byte) {
	c.wmu.Lock()
	c.lines = headLines{on: on}
	if on {
		c.lines.segs[lineSecurity] = security
	}
	c.wmu.Unlock()
}

// setLines sets the freshness lines (nil: that place unchanged) and
// reports whether the answer being served takes its lines from c; when it
// does not, nothing was set.
func (c *limitedConn) setLines(resourceVersion, lastEvent, state, simulated []byte) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.lines.on {
		return false
	}
	for i, b := range [...][]byte{lineResourceVersion: resourceVersion, lineLastEvent: lastEvent,
		lineState: state, lineSimulated: simulated} {
		if b != nil {
			c.lines.segs[i] = b
		}
	}
	c.lines.fresh = true
	return true
}

// linesFresh reports whether the answer being served takes its lines from
// c (on) and whether a freshness was set among them.
func (c *limitedConn) linesFresh() (on, fresh bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.lines.on, c.lines.fresh
}

// statusLineEnd is the length of the status line that starts p, its CRLF
// included, when p starts a final answer (HTTP/1.x, a status of 200 or
// more); 0 when p starts an interim answer (100 Continue), which leaves
// the lines for the final one; -1 when p starts no answer at all.
func statusLineEnd(p []byte) int {
	const prefix = "HTTP/1."
	if len(p) < len("HTTP/1.1 200\r\n") || string(p[:len(prefix)]) != prefix || p[8] != ' ' {
		return -1
	}
	if p[9] == '1' {
		return 0
	}
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		return -1
	}
	return i + 1
}

// spliceLines (under wmu, lines on) is Write for a write that may start
// the answer: one that starts its status line leaves with the lines after
// that line, in the same write or in what is held. The lines are then
// off. A write that starts no answer (never seen: net/http writes the
// status line first) drops them rather than send them as body bytes.
func (c *limitedConn) spliceLines(p []byte) (int, error) {
	end := statusLineEnd(p)
	if end == 0 {
		return c.writeLocked(p) // 100 Continue: the lines wait for the answer
	}
	segs := c.lines.segs
	c.lines = headLines{}
	if end < 0 {
		return c.writeLocked(p)
	}
	linesSpliced.Add(1)
	if c.werr != nil {
		return 0, c.werr
	}
	if c.held != nil {
		c.sendKept()
		if c.werr != nil {
			return 0, c.werr
		}
		*c.held = append(*c.held, p[:end]...)
		for _, s := range segs {
			*c.held = append(*c.held, s...)
		}
		n, err := c.writeLocked(p[end:])
		return end + n, err
	}
	bufs := c.lineVec[:0]
	bufs = append(bufs, p[:end])
	lines := 0
	for _, s := range segs {
		if len(s) > 0 {
			bufs = append(bufs, s)
			lines += len(s)
		}
	}
	bufs = append(bufs, p[end:])
	c.bufs = bufs
	sent, err := sendBuffers(c.Conn, &c.bufs)
	c.bufs = nil
	clear(c.lineVec[:])
	if err != nil {
		c.werr = err
	}
	// What of p was sent: the status line, then (past the lines) the rest.
	n := min(int(sent), end)
	if rest := int(sent) - end - lines; rest > 0 {
		n += rest
	}
	return n, err
}

// linesSpliced counts the answers whose lines left after their status
// line, which tests read to know the lines were written, not the map.
var linesSpliced atomic.Uint64

// Security and freshness lines, rendered as net/http writes a header
// (writeSubset): a value's CR and LF become spaces, and it is trimmed.
var headerNewlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

func appendHeaderLine(b []byte, key, value string) []byte {
	b = append(b, key...)
	b = append(b, ": "...)
	b = append(b, textproto.TrimString(headerNewlineToSpace.Replace(value))...)
	return append(b, "\r\n"...)
}

// stateLines are the lines of synced, stale and the watch's state, by
// stateIndex.
var stateLines = func() (lines [8][]byte) {
	for i := range lines {
		synced, stale, connected := i&1 != 0, i&2 != 0, i&4 != 0
		watch := "disconnected"
		if connected {
			watch = "connected"
		}
		b := appendHeaderLine(nil, HeaderSynced, boolValue(synced)[0])
		b = appendHeaderLine(b, HeaderStale, boolValue(stale)[0])
		lines[i] = appendHeaderLine(b, HeaderWatch, watch)
	}
	return lines
}()

func stateIndex(synced, stale, connected bool) int {
	i := 0
	if synced {
		i |= 1
	}
	if stale {
		i |= 2
	}
	if connected {
		i |= 4
	}
	return i
}

var simulatedLine = appendHeaderLine(nil, HeaderSimulated, "true")

// securityLines renders headers (newSecurityHeaders) as lines, but
// Cache-Control, which handlers replace in the map: it stays there.
func securityLines(headers []header) (lines []byte, inMap []header) {
	for _, h := range headers {
		if h.key == "Cache-Control" {
			inMap = append(inMap, h)
			continue
		}
		for _, v := range h.values {
			lines = appendHeaderLine(lines, h.key, v)
		}
	}
	return lines, inMap
}

// startAnswerLines decides where the answer to c puts its security and
// freshness headers: lines on its connection (a plain HTTP/1.x answer
// that is not a stream, whose writes come from this request's goroutine),
// or the header map. true when lines.
func (s *Server) startAnswerLines(c echo.Context, stream bool) bool {
	req := c.Request()
	lc := connOf(req)
	if lc == nil {
		return false
	}
	on := !stream && req.ProtoMajor == 1 && req.TLS == nil
	lc.startLines(on, s.secLines)
	return on
}

// lineVecLen bounds spliceLines' vector: the status line, the lines'
// places, the rest.
const lineVecLen = linePlaces + 2
