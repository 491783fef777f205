// Command benchfeed is the event source of make bench's fan-out ceiling: the
// demo's fake API server, run standalone, whose pods change only when the
// harness asks (GET /bench/publish?rate=R&count=N), each change a realistic
// pod update stamped with its send time in the -stamp annotation (see
// Feed). It prints "READY <addr>" once listening. The harness
// (test/bench) builds and runs it; nothing else does.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	stamp := flag.String("stamp", "kubeindex.bench/sent", "annotation carrying each update's send time")
	flag.Parse()
	if err := run(*listen, *stamp); err != nil {
		fmt.Fprintln(os.Stderr, "benchfeed:", err)
		os.Exit(1)
	}
}

func run(listen, stamp string) error {
	f, err := NewFeed(stamp)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Println("READY", ln.Addr())
	srv := &http.Server{Handler: f.Handler(), ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}
