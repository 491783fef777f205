//go:build unix

package server

import (
	"io"
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestAnswersCarryTheirLength: a lookup's answer, a GET by key and a short
// list go out whole, with Content-Length, not chunked (net/http chunks any
// body past 2 KiB whose length it was not told).
func TestAnswersCarryTheirLength(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	pod := podOnThePodNetwork(t, f.Cache)
	_, addr := serveReal(t, f.Cache, Options{})
	for _, target := range []string{
		"/api/v1/pods/" + pod.Key(),
		"/api/v1/ip/" + gjson.GetBytes(pod.Raw(), "status.podIP").Str,
		"/api/v1/pods?limit=3",
	} {
		resp, err := http.Get("http://" + addr + target)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			t.Errorf("%s: %v", target, err)
		case resp.StatusCode != http.StatusOK:
			t.Errorf("%s: %s", target, resp.Status)
		case len(body) <= 2048:
			t.Errorf("%s: a %d-byte body proves nothing: net/http sets the length of one under 2 KiB itself", target, len(body))
		case resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0:
			t.Errorf("%s: Content-Length %d, Transfer-Encoding %v, body %d bytes; expect the length, not chunked",
				target, resp.ContentLength, resp.TransferEncoding, len(body))
		}
	}
}
