//go:build unix

package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// BenchmarkAnswerCost measures what one answer costs: sequential GETs over
// one raw keep-alive connection, read by a client that allocates nothing
// and reads only the status line and Content-Length, so that the CPU and
// the allocations per request are mostly the server's (its profile:
// -cpuprofile, or perf record -g). Lent answers (limitedConn.lend) are
// measured here:
//
//	go test -run XXX -bench AnswerCost -benchtime 40000x -benchmem ./server
func BenchmarkAnswerCost(b *testing.B) {
	f := cachetest.Start(b, cachetest.DefaultSpecs()...)
	pod := podOnThePodNetwork(b, f.Cache)
	_, addr := serveReal(b, f.Cache, Options{})
	for _, bc := range []struct{ name, target string }{
		{"get_pod", "/api/v1/pods/" + pod.Key()},
		{"ip_pod", "/api/v1/ip/" + gjson.GetBytes(pod.Raw(), "status.podIP").Str},
	} {
		b.Run(bc.name, func(b *testing.B) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			req := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", bc.target, addr))
			r := bufio.NewReaderSize(conn, 64<<10)
			body := make([]byte, 1<<20)
			one := func() {
				if _, err := conn.Write(req); err != nil {
					b.Fatal(err)
				}
				status, err := r.ReadSlice('\n')
				if err != nil {
					b.Fatal(err)
				}
				if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
					b.Fatalf("%s: %q", bc.target, status) // a fast error is no answer
				}
				n := -1
				for {
					line, err := r.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if len(line) <= 2 {
						break
					}
					if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
						n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
					}
				}
				if n < 0 {
					b.Fatal("no length")
				}
				if _, err := io.ReadFull(r, body[:n]); err != nil {
					b.Fatal(err)
				}
			}
			for range 2000 {
				one()
			}
			cpu := processCPU()
			b.ResetTimer()
			for range b.N {
				one()
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N)/1000, "cpu-µs/op")
		})
	}
}
