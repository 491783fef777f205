// Command benchecho is the HTTP ceiling of make bench: a trivial echo v4
// handler answering GET /bytes/:n with n bytes of JSON, and GET
// /bytes/:n/:k with the k-th of a set of distinct bodies of n bytes, over
// the same net/http server kubeindex uses. It prints "READY <addr>" once
// listening.
//
// The set is what a server answering many objects is compared with: make
// bench asks kubeindex for a thousand pods in turn, whose bytes the CPU
// cannot all keep in its caches, while one body asked again and again
// never leaves them. Body k of a set is made on its first request, so the
// set holds as many bodies as the client asks for.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// maxSet bounds k in /bytes/:n/:k.
const maxSet = 4096

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	if err := run(*listen); err != nil {
		fmt.Fprintln(os.Stderr, "benchecho:", err)
		os.Exit(1)
	}
}

func run(listen string) error {
	var bodies sync.Map // size -> []byte, built once per size
	var sets sync.Map   // size -> *[maxSet]atomic.Pointer[[]byte], each body built on first use
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/bytes/:n", func(c echo.Context) error {
		n, err := size(c)
		if err != nil {
			return err
		}
		b, ok := bodies.Load(n)
		if !ok {
			b, _ = bodies.LoadOrStore(n, jsonBody(n))
		}
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b.([]byte))
	})
	e.GET("/bytes/:n/:k", func(c echo.Context) error {
		n, err := size(c)
		if err != nil {
			return err
		}
		k, err := strconv.Atoi(c.Param("k"))
		if err != nil || k < 0 || k >= maxSet {
			return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("k: 0 to %d", maxSet-1))
		}
		s, ok := sets.Load(n)
		if !ok {
			s, _ = sets.LoadOrStore(n, new([maxSet]atomic.Pointer[[]byte]))
		}
		slot := &s.(*[maxSet]atomic.Pointer[[]byte])[k]
		b := slot.Load()
		if b == nil {
			body := jsonBody(n)
			slot.CompareAndSwap(nil, &body)
			b = slot.Load()
		}
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, *b)
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Println("READY", ln.Addr())
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	return srv.Serve(ln)
}

// size reads the body size of a request, :n.
func size(c echo.Context) (int, error) {
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 2 || n > 16<<20 {
		return 0, echo.NewHTTPError(http.StatusBadRequest, "n: 2 to 16 MiB")
	}
	return n, nil
}

// jsonBody is a JSON string of exactly n bytes, in an allocation of its
// own.
func jsonBody(n int) []byte {
	return append(append([]byte{'"'}, bytes.Repeat([]byte{'x'}, n-2)...), '"')
}
