package server

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"
)

// TestObjectsInPiecesAnswerAsStored: a GET and a list of objects the
// cache holds in pieces (repeated content stored once) answer the
// objects' bytes exactly, with their length.
func TestObjectsInPiecesAnswerAsStored(t *testing.T) {
	pod, err := os.ReadFile("../cache/testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	var o *cache.Object
	for range 2 { // the second meeting of its containers stores them once
		if o, err = cache.NewObject(pod, "v1", "Pod"); err != nil {
			t.Fatal(err)
		}
	}
	if !o.Chunked() {
		t.Fatal("the pod is not held in pieces")
	}
	want := o.Raw()

	rec := httptest.NewRecorder()
	if err := writeStored(echo.New().NewContext(httptest.NewRequest("GET", "/", nil), rec), o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Body.Bytes(), want) || rec.Header().Get("Content-Length") != strconv.Itoa(len(want)) {
		t.Fatalf("GET answered %d bytes (Content-Length %s), want the object's %d", rec.Body.Len(), rec.Header().Get("Content-Length"), len(want))
	}

	head := func(b []byte) []byte { return append(b, `{"kind":"PodList"`...) }
	items := []*cache.Object{o, o}
	list := append(append(append(append([]byte(`{"kind":"PodList","items":[`), want...), ','), want...), "]}\n"...)
	rec = httptest.NewRecorder()
	if err := writeEnvelope(rec, nil, items, head); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.Body.Bytes(), list) {
		t.Fatalf("the list answered\n%.200s\nwant\n%.200s", rec.Body.Bytes(), list)
	}
	if b := appendEnvelope(items, head); b == nil || !bytes.Equal(*b, list) {
		t.Fatal("the list in an answer buffer is not the objects' bytes")
	}
}

// TestKubeListOfObjectsInPieces: a /k8s list writes each object held in
// pieces without its kind and apiVersion, as it writes one held whole, and
// says the length it writes.
func TestKubeListOfObjectsInPieces(t *testing.T) {
	pod, err := os.ReadFile("../cache/testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	var o *cache.Object
	for range 2 {
		if o, err = cache.NewObject(pod, "v1", "Pod"); err != nil {
			t.Fatal(err)
		}
	}
	if !o.Chunked() {
		t.Fatal("the pod is not held in pieces")
	}
	raw := o.Raw()
	cut := typeMetaEnd(raw)
	if cut <= 1 {
		t.Fatal("the pod has no leading kind and apiVersion")
	}
	want := append([]byte{'{'}, raw[cut:]...)
	var enc withoutTypeMeta
	if n := enc.size(o); n != len(want) {
		t.Fatalf("size %d, want %d", n, len(want))
	}
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	enc.write(bw, o)
	bw.Flush()
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("written\n%.200s\nwant\n%.200s", b.Bytes(), want)
	}
}

// TestPiecesThroughARealServer: GETs and address lookups of every pod,
// many on one keep-alive connection, answer the stored bytes exactly,
// those held in pieces and longer than net/http's buffers lent to the
// connection as their pieces (writePieces) included.
func TestPiecesThroughARealServer(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	_, addr := serveReal(t, f.Cache, Options{})
	res, err := f.Cache.List("pods", cache.ListQuery{})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, DisableCompression: true}}
	defer client.CloseIdleConnections()
	get := func(path string) ([]byte, http.Header) {
		t.Helper()
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %s: %.200s", path, err, resp.Status, b)
		}
		return b, resp.Header
	}
	lent, sent := 0, piecesSent.Load()
	for _, o := range res.Items {
		if o.Chunked() && o.Len() >= minPiecesLoan {
			lent++
		}
		for range 2 { // a connection's loans end with their answers
			b, h := get("/api/v1/pods/" + o.Key())
			if want := o.Raw(); !bytes.Equal(b, want) || h.Get("Content-Length") != strconv.Itoa(len(want)) {
				t.Fatalf("GET %s answered %d bytes, Content-Length %s; want the stored %d", o.Key(), len(b), h.Get("Content-Length"), len(want))
			}
		}
		ip := gjson.GetBytes(o.Raw(), "status.podIP").Str
		if ip == "" || gjson.GetBytes(o.Raw(), "spec.hostNetwork").Bool() {
			continue
		}
		lookup, err := f.Cache.LookupAddress(ipowner.Query{IP: ip})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		if err := writeIPLookup(rec, nil, lookup); err != nil {
			t.Fatal(err)
		}
		if b, _ := get("/api/v1/ip/" + ip); !bytes.Equal(b, rec.Body.Bytes()) {
			t.Fatalf("GET /api/v1/ip/%s answered\n%.300s\nwant\n%.300s", ip, b, rec.Body.Bytes())
		}
	}
	if lent == 0 {
		t.Fatal("no pod of the demo is held in pieces and long enough to be lent so")
	}
	if got := piecesSent.Load() - sent; got < uint64(2*lent) {
		t.Fatalf("%d answers sent as their pieces; want the %d GETs of the %d pods held in pieces and long enough", got, 2*lent, lent)
	}
}
