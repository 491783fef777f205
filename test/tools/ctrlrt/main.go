// Command ctrlrt is a controller-runtime client (sigs.k8s.io/controller-runtime,
// at the version go.mod pins) as operators run one: a manager whose cache
// holds a typed Pod informer and a metadata-only one (PartialObjectMetadata
// with the pods' kind, what builder.OnlyMetadata asks for). The end-to-end
// tests run it against the API server and against kubeindex's /k8s over TLS
// and compare what each holds. It is a module of its own so that
// controller-runtime's dependencies leave test/go.mod alone;
// cluster.BuildCtrlrt builds it.
//
// It writes JSON lines to stdout: {"synced":true} once both informers have
// synced, one line per event an informer hands its handlers, and, for each
// line "dump" read on stdin, one line per informer with the pods its cache
// holds and one with the bytes read so far. It exits when stdin closes,
// and with status 1 when the caches do not sync within -sync-timeout (each
// failed request's error is written to stderr first: a wrong CA shows as
// a failure to verify the server's certificate).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ctrlrt:", err)
		os.Exit(1)
	}
}

// Pod is what the tests compare of a pod held in a cache.
type Pod struct {
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Labels          map[string]string `json:"labels,omitempty"`
}

// Line is one line of output; only the fields of its kind are set.
type Line struct {
	Synced bool `json:"synced,omitempty"`

	// An event: the informer ("typed" or "metadata"), ADDED, MODIFIED or
	// DELETED, the Go type the handler was given and the pod.
	Informer string `json:"informer,omitempty"`
	Event    string `json:"event,omitempty"`
	GoType   string `json:"goType,omitempty"`
	Pod      *Pod   `json:"pod,omitempty"`

	// A dump: the informer's pods, sorted by namespace and name.
	Pods []Pod `json:"pods,omitempty"`

	// The bytes read, per informer: response bodies, and the Content-Types
	// the server answered with.
	Bytes map[string]*Traffic `json:"bytes,omitempty"`
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ctrlrt", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the server to read from (required)")
	syncTimeout := fs.Duration("sync-timeout", 60*time.Second, "how long the caches may take to sync")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return errors.New("-kubeconfig is required")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.SetLogger(zap.New(zap.WriteTo(stderr)))

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	counter := newCounter(stderr)
	cfg.WrapTransport = counter.wrap
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	out := &writer{enc: json.NewEncoder(stdout)}
	c := mgr.GetCache()
	typed, meta := &corev1.Pod{}, podMetadata()
	for name, obj := range map[string]client.Object{"typed": typed, "metadata": meta} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("%s informer: %w", name, err)
		}
		if _, err := inf.AddEventHandler(out.handler(name)); err != nil {
			return err
		}
	}

	mgrCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	syncCtx, cancelSync := context.WithTimeout(ctx, *syncTimeout)
	synced := c.WaitForCacheSync(syncCtx)
	cancelSync()
	if !synced {
		cancel()
		<-mgrDone
		return fmt.Errorf("the caches did not sync within %v (last request error: %v)", *syncTimeout, counter.lastError())
	}
	out.write(Line{Synced: true})

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
	}()
	for {
		select {
		case <-ctx.Done():
			cancel()
			return <-mgrDone
		case err := <-mgrDone:
			return fmt.Errorf("the manager stopped: %w", err)
		case l, ok := <-lines:
			if !ok {
				cancel()
				return <-mgrDone
			}
			if l != "dump" {
				fmt.Fprintf(stderr, "ctrlrt: unknown command %q (want dump)\n", l)
				continue
			}
			if err := dump(ctx, c, out, counter); err != nil {
				return err
			}
		}
	}
}

// podMetadata is the metadata-only form of a pod, as builder.OnlyMetadata
// makes it: the cache then lists and watches through client-go's metadata
// client.
func podMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return m
}

// dump writes what each cache holds, read through the cache's List as a
// reconciler reads it, then the bytes read so far.
func dump(ctx context.Context, c cache.Cache, out *writer, counter *counter) error {
	var typed corev1.PodList
	if err := c.List(ctx, &typed); err != nil {
		return err
	}
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, meta); err != nil {
		return err
	}
	var pods []Pod
	for i := range typed.Items {
		pods = append(pods, podOf(&typed.Items[i]))
	}
	out.write(Line{Informer: "typed", Pods: sorted(pods)})
	pods = nil
	for i := range meta.Items {
		pods = append(pods, podOf(&meta.Items[i]))
	}
	out.write(Line{Informer: "metadata", Pods: sorted(pods)})
	out.write(Line{Bytes: counter.snapshot()})
	return nil
}

func sorted(pods []Pod) []Pod {
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	return pods
}

func podOf(o metav1.Object) Pod {
	return Pod{Namespace: o.GetNamespace(), Name: o.GetName(), UID: string(o.GetUID()), ResourceVersion: o.GetResourceVersion(), Labels: o.GetLabels()}
}

// writer serialises the lines of the informers' handlers and the dumps.
type writer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *writer) write(l Line) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(l)
}

// handler writes each event an informer hands its handlers.
func (w *writer) handler(informer string) toolscache.ResourceEventHandler {
	event := func(kind string, obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		l := Line{Informer: informer, Event: kind, GoType: fmt.Sprintf("%T", obj)}
		if o, ok := obj.(metav1.Object); ok {
			p := podOf(o)
			l.Pod = &p
		}
		w.write(l)
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { event("ADDED", obj) },
		UpdateFunc: func(_, obj any) { event("MODIFIED", obj) },
		DeleteFunc: func(obj any) { event("DELETED", obj) },
	}
}

// Traffic is what one informer read.
type Traffic struct {
	Requests     int            `json:"requests"`
	Bytes        int64          `json:"bytes"`
	ContentTypes map[string]int `json:"contentTypes"`
}

// counter counts the response bytes of every request, per informer: the
// metadata client asks for PartialObjectMetadata(List) in its Accept
// header, the typed client does not.
type counter struct {
	stderr io.Writer

	mu      sync.Mutex
	traffic map[string]*Traffic
	lastErr error
}

func newCounter(stderr io.Writer) *counter {
	return &counter{stderr: stderr, traffic: map[string]*Traffic{}}
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.lastErr = err
			fmt.Fprintf(c.stderr, "ctrlrt: %s %s: %v\n", r.Method, r.URL, err)
			return resp, err
		}
		informer := "typed"
		switch {
		case strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata"):
			informer = "metadata"
		case !strings.Contains(r.URL.Path, "/pods"):
			informer = "discovery"
		}
		t := c.traffic[informer]
		if t == nil {
			t = &Traffic{ContentTypes: map[string]int{}}
			c.traffic[informer] = t
		}
		t.Requests++
		t.ContentTypes[resp.Header.Get("Content-Type")]++
		resp.Body = &countingBody{ReadCloser: resp.Body, c: c, t: t}
		return resp, nil
	})
}

func (c *counter) lastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func (c *counter) snapshot() map[string]*Traffic {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*Traffic{}
	for k, t := range c.traffic {
		ct := map[string]int{}
		for k, v := range t.ContentTypes {
			ct[k] = v
		}
		out[k] = &Traffic{Requests: t.Requests, Bytes: t.Bytes, ContentTypes: ct}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	c *counter
	t *Traffic
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.t.Bytes += int64(n)
	b.c.mu.Unlock()
	return n, err
}
