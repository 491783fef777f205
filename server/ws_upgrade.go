package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
)

// wsReadBufferSize is gorilla's read buffer: enough for any control frame
// and a typical client message; larger messages take a few more reads.
const wsReadBufferSize = 512

// wsWriteBuffers would be gorilla's message buffers; it writes none
// (frameWriter does), only control frames, which need no buffer. The pool
// keeps it from allocating one per socket.
var wsWriteBuffers = &sync.Pool{}

// upgrade checks the origin and switches to the WebSocket protocol. Before
// the switch, failures are returned for the one error translation; after
// it, the echo context must no longer be used.
func (s *Server) upgrade(c echo.Context, header http.Header) (*websocket.Conn, error) {
	if err := s.checkOrigin(c.Request()); err != nil {
		return nil, err
	}
	var refused error
	up := websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   wsReadBufferSize,
		WriteBufferPool:  wsWriteBuffers,
		CheckOrigin:      func(*http.Request) bool { return true }, // checked above, with a better message
		Subprotocols:     []string{WebSocketProtocol},              // selected when offered (browsers sending a token must)
		Error: func(_ http.ResponseWriter, _ *http.Request, status int, reason error) {
			refused = echo.NewHTTPError(status, reason.Error())
		},
	}
	hc := &hijackCapture{ResponseWriter: c.Response()}
	conn, err := up.Upgrade(hc, c.Request(), header)
	if err != nil {
		if refused != nil {
			return nil, refused
		}
		return nil, errHijacked
	}
	hc.release()
	return conn, nil
}

// hijackCapture is the response as the upgrade sees it: it keeps the
// buffers the hijack hands over, so that release can shrink them.
type hijackCapture struct {
	http.ResponseWriter
	rw *bufio.ReadWriter
}

func (h *hijackCapture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.rw = rw
	return conn, rw, err
}

func (h *hijackCapture) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// release gives back the memory of the connection's HTTP buffers, 4 KiB
// each. The hijack made them ours and gorilla uses neither (it reads
// through its own small buffer, and frameWriter writes the messages), but
// net/http keeps them referenced for as long as the handler runs, which is
// the socket's life: so their contents are replaced by minimal buffers
// that fail if used. A read buffer still holding bytes the client sent
// early is left alone: gorilla reads those from it first.
func (h *hijackCapture) release() {
	if h.rw == nil {
		return
	}
	*h.rw.Writer = *bufio.NewWriterSize(released{}, 16)
	if h.rw.Reader.Buffered() == 0 {
		*h.rw.Reader = *bufio.NewReaderSize(released{}, 16)
	}
}

// released stands for the connection behind buffers given back.
type released struct{}

var errReleased = errors.New("the HTTP buffers of an upgraded WebSocket are released")

func (released) Read([]byte) (int, error)  { return 0, errReleased }
func (released) Write([]byte) (int, error) { return 0, errReleased }
