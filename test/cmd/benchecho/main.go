// Command benchecho is the HTTP ceiling of make bench: a trivial echo v4
// handler answering GET /bytes/:n with n bytes of JSON, over the same
// net/http server kubeindex uses. It prints "READY <addr>" once listening.
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
	"time"

	"github.com/labstack/echo/v4"
)

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
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/bytes/:n", func(c echo.Context) error {
		n, err := strconv.Atoi(c.Param("n"))
		if err != nil || n < 2 || n > 16<<20 {
			return echo.NewHTTPError(http.StatusBadRequest, "n: 2 to 16 MiB")
		}
		b, ok := bodies.Load(n)
		if !ok {
			b, _ = bodies.LoadOrStore(n, jsonBody(n))
		}
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b.([]byte))
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Println("READY", ln.Addr())
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	return srv.Serve(ln)
}

// jsonBody is a JSON string of exactly n bytes.
func jsonBody(n int) []byte {
	return append(append([]byte{'"'}, bytes.Repeat([]byte{'x'}, n-2)...), '"')
}
