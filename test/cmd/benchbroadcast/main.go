// Command benchbroadcast is the comparison of make bench's fan-out ceiling:
// a bare gorilla/websocket broadcaster (see bench.Broadcaster) following
// the pods watch of -source and sending each event to every WebSocket
// client. It prints "READY <addr>" once listening, and exits when the
// watch ends.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/kubeindex/kubeindex/test/bench"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	source := flag.String("source", "", "base URL of the API server whose pods watch is broadcast (http://host:port)")
	flag.Parse()
	if err := run(*listen, *source); err != nil {
		fmt.Fprintln(os.Stderr, "benchbroadcast:", err)
		os.Exit(1)
	}
}

func run(listen, source string) error {
	if source == "" {
		return fmt.Errorf("-source is required")
	}
	b := bench.NewBroadcaster()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	// READY once the watch is open: no event published after it is missed.
	return b.Follow(context.Background(), source, func() { fmt.Println("READY", ln.Addr()) })
}
