// Command benchfeed is the event source of make bench's fan-out ceiling: the
// demo's fake API server, run standalone, whose pods change only when the
// harness asks (GET /bench/publish?rate=R&count=N), each change a realistic
// pod update stamped with its send time in the -stamp annotation (see
// Feed). With -pods N it holds the demo's crowd of N pods as well, still
// unless told otherwise: the source of make bench's questions at a size
// the real API server takes too long to seed. It prints "READY <addr>"
// once listening. The harness (test/bench) builds and runs it; nothing
// else does.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/kubeindex/kubeindex/demo"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	stamp := flag.String("stamp", "kubeindex.bench/sent", "annotation carrying each update's send time")
	pods := flag.Int("pods", 0, fmt.Sprintf("grow the demo cluster to this many pods (at most %d); 0 keeps the scenario's own", demo.MaxPods))
	flag.Parse()
	if *pods < 0 || *pods > demo.MaxPods {
		fmt.Fprintf(os.Stderr, "benchfeed: -pods must be between 0 and %d, got %d\n", demo.MaxPods, *pods)
		os.Exit(2)
	}
	if err := run(*listen, *stamp, *pods); err != nil {
		fmt.Fprintln(os.Stderr, "benchfeed:", err)
		os.Exit(1)
	}
}

func run(listen, stamp string, pods int) error {
	f, err := NewFeed(stamp, pods)
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
