// Command benchsqlite is make bench's SQLite beside kubeindex: it loads
// the pods of a kubeindex (its Table of them, with the objects) into an
// in-memory SQLite in rancher/steve's shape (package sqlpods) and answers
// the same questions over HTTP, from an echo server as kubeindex does, with
// the same JSON: a list whose items are the stored objects and whose
// metadata carries totalItemCount, and a Counts document.
//
//	GET /catalog                             the questions: names, kubeindex's parameters
//	GET /questions?name=N&offset=O&limit=L   a page of the question named N
//	GET /counts                              sqlpods.Counts
//	GET /stats                               rows, database bytes, memory
//
// It prints "READY <addr>" once loaded and listening.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/test/sqlite/sqlpods"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	source := flag.String("source", "", "kubeindex's base URL, whose pods are loaded (required)")
	page := flag.Int("page", 2000, "pods per Table page read from -source")
	flag.Parse()
	if err := run(*listen, *source, *page); err != nil {
		fmt.Fprintln(os.Stderr, "benchsqlite:", err)
		os.Exit(1)
	}
}

// Stats is the body of GET /stats.
type Stats struct {
	Rows int `json:"rows"`
	// DBBytes is the database's pages: tables and indexes.
	DBBytes int64 `json:"dbBytes"`
	// RSSBefore and RSSAfter are the process's resident memory before the
	// load and after it (a GC and a return of free memory to the system
	// after it), bytes.
	RSSBefore int64 `json:"rssBefore"`
	RSSAfter  int64 `json:"rssAfter"`
	// GoHeap is the Go heap after the load (the driver's C memory is not
	// in it).
	GoHeap      int64   `json:"goHeap"`
	LoadSeconds float64 `json:"loadSeconds"`
}

func run(listen, source string, page int) error {
	if source == "" {
		return fmt.Errorf("-source is required")
	}
	ctx := context.Background()
	st := Stats{RSSBefore: rss()}
	begin := time.Now()
	s, err := sqlpods.Open()
	if err != nil {
		return err
	}
	if st.Rows, err = load(ctx, s, source, page); err != nil {
		return err
	}
	if err := s.Index(ctx); err != nil {
		return err
	}
	st.LoadSeconds = time.Since(begin).Seconds()
	if st.DBBytes, err = s.Bytes(ctx); err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st.RSSAfter, st.GoHeap = rss(), int64(ms.HeapAlloc)

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/questions", func(c echo.Context) error {
		q, ok := sqlpods.QuestionByName(c.QueryParam("name"))
		if !ok {
			return echo.NewHTTPError(http.StatusBadRequest, "name: not a question")
		}
		offset, err1 := strconv.Atoi(c.QueryParam("offset"))
		limit, err2 := strconv.Atoi(c.QueryParam("limit"))
		if err1 != nil || err2 != nil || offset < 0 || limit <= 0 {
			return echo.NewHTTPError(http.StatusBadRequest, "offset and limit: numbers")
		}
		p, err := s.Page(c.Request().Context(), q, offset, limit)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"kind":"PodList","apiVersion":"v1","metadata":{"totalItemCount":%d},"items":[`, p.Total)
		for i, o := range p.Objects {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(o)
		}
		b.WriteString("]}\n")
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b.Bytes())
	})
	e.GET("/counts", func(c echo.Context) error {
		total, groups, err := s.Counts(c.Request().Context(), sqlpods.Counts)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"kind": "Counts", "resource": "pods", "total": total, "groups": groups})
	})
	e.GET("/stats", func(c echo.Context) error { return c.JSON(http.StatusOK, st) })
	e.GET("/catalog", func(c echo.Context) error { return c.JSON(http.StatusOK, catalog()) })
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Println("READY", ln.Addr())
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	return srv.Serve(ln)
}

// Catalog is the body of GET /catalog: what make bench asks kubeindex
// (its list and counts parameters) beside each question here.
type Catalog struct {
	Questions []Entry `json:"questions"`
	Counts    Entry   `json:"counts"`
}

// Entry is one question: its name here and kubeindex's parameters.
type Entry struct {
	Name  string `json:"name"`
	Query string `json:"query"`
}

func catalog() Catalog {
	c := Catalog{Counts: Entry{Name: sqlpods.Counts.Name, Query: sqlpods.Counts.Query}}
	for _, q := range sqlpods.Questions {
		c.Questions = append(c.Questions, Entry{Name: q.Name, Query: q.Query})
	}
	return c
}

// load reads kubeindex's Table of the pods, page by page, into s.
func load(ctx context.Context, s *sqlpods.Store, source string, page int) (int, error) {
	client := &http.Client{Timeout: 5 * time.Minute}
	n, cont := 0, ""
	for {
		u := fmt.Sprintf("%s/k8s/api/v1/pods?includeObject=Object&limit=%d", strings.TrimSuffix(source, "/"), page)
		if cont != "" {
			u += "&continue=" + url.QueryEscape(cont)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return n, err
		}
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := client.Do(req)
		if err != nil {
			return n, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return n, fmt.Errorf("%s: %s", u, resp.Status)
		}
		rows, next, err := sqlpods.ReadTable(resp.Body)
		resp.Body.Close()
		if err != nil {
			return n, fmt.Errorf("%s: %w", u, err)
		}
		if err := s.Insert(ctx, rows); err != nil {
			return n, err
		}
		n += len(rows)
		if cont = next; cont == "" {
			return n, nil
		}
	}
}

// rss is the process's resident memory (bytes), from /proc/self/statm.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
