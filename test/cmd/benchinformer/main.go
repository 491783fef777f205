// Command benchinformer is make bench's reference client: typed client-go
// pod informers, as a controller would run them, in a process of its own.
// It syncs the pods matching -selector and prints
//
//	SYNCED
//	HEAP <bytes>
//	COUNT <pods>
//
// SYNCED as soon as every informer has synced (the harness reads this
// process's CPU time then; with -hold it waits for a line on stdin before
// going on, so that the heap's forced collections stay out of it), HEAP the live heap the informers added, after
// forced GCs, COUNT the pods they hold, summed. Then it waits to be killed.
//
// By default it is one SharedIndexInformer of the cluster in -kubeconfig
// with client-go's default content types. -server points it at a server
// without credentials instead (kubeindex's /k8s), -content chooses json or
// protobuf, and -informers N runs N of them, each over its own connection,
// as N processes would; with N > 1 each is a client-go Reflector whose
// store keeps only keys, so that N copies of the pods do not have to fit
// in one process: what each receives and decodes is the same.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	server := flag.String("server", "", "URL of a server to use without credentials instead of -kubeconfig's (e.g. kubeindex's /k8s)")
	content := flag.String("content", "", "json or protobuf: the only content type asked for (default: client-go's default)")
	n := flag.Int("informers", 1, "informers to run, each over its own connection")
	selector := flag.String("selector", "", "label selector of the pods to cache")
	hold := flag.Bool("hold", false, "after SYNCED, wait for a line on stdin before measuring the heap")
	flag.Parse()
	if err := run(*kubeconfig, *server, *content, *selector, *n, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "benchinformer:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, server, content, selector string, n int, hold bool) error {
	if n < 1 {
		return fmt.Errorf("-informers %d: want at least 1", n)
	}
	cfg := &rest.Config{Host: server}
	if server == "" {
		var err error
		if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return err
		}
	}
	// kubernetes.NewForConfig's defaults, as most controllers use them:
	// typed clients of built-in types speak protobuf. No client-side
	// throttling in the way of a list.
	cfg.QPS, cfg.Burst = 1000, 2000
	switch content {
	case "":
	case "json":
		cfg.ContentType, cfg.AcceptContentTypes = apiruntime.ContentTypeJSON, apiruntime.ContentTypeJSON
	case "protobuf":
		// As kube-controller-manager configures its clients.
		cfg.ContentType = apiruntime.ContentTypeProtobuf
		cfg.AcceptContentTypes = apiruntime.ContentTypeProtobuf + "," + apiruntime.ContentTypeJSON
	default:
		return fmt.Errorf("-content %q: want json or protobuf", content)
	}
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = selector }
	base := heapAfterGC()
	ctx := context.Background()
	var count func() int
	if n == 1 {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(tweak))
		pods := factory.Core().V1().Pods().Informer()
		factory.Start(ctx.Done())
		// WaitFor, not WaitForCacheSync, which looks every 100 ms: SYNCED
		// would come up to that long after the sync, and the harness
		// reads the CPU and the wall time when it comes. kubeindex waits
		// on its queues' sync the same way before it reports.
		if !cache.WaitFor(ctx, "", pods.HasSyncedChecker()) {
			return fmt.Errorf("not synced")
		}
		count = func() int { return len(pods.GetStore().ListKeys()) }
	} else {
		stores := make([]*keyStore, n)
		for i := range stores {
			c := rest.CopyConfig(cfg)
			c.Transport = nil
			// Its own connection: client-go shares one between equal
			// configs unless it is told otherwise.
			c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
			cs, err := kubernetes.NewForConfig(c)
			if err != nil {
				return err
			}
			lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "", tweak)
			stores[i] = newKeyStore()
			r := cache.NewReflectorWithOptions(lw, &corev1.Pod{}, stores[i], cache.ReflectorOptions{Name: fmt.Sprintf("informer-%d", i)})
			go r.RunWithContext(ctx)
		}
		for _, s := range stores {
			<-s.synced
		}
		count = func() int {
			sum := 0
			for _, s := range stores {
				sum += s.len()
			}
			return sum
		}
	}
	fmt.Println("SYNCED")
	if hold {
		// The harness reads this process's CPU when SYNCED comes: the
		// forced collections below must not fall into it.
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("-hold: reading stdin: %w", err)
		}
	}
	fmt.Printf("HEAP %d\n", int64(heapAfterGC())-int64(base))
	fmt.Printf("COUNT %d\n", count())
	for {
		time.Sleep(time.Hour)
	}
}

// keyStore is a reflector's store that keeps each object's key only.
type keyStore struct {
	mu     sync.Mutex
	keys   map[string]struct{}
	synced chan struct{} // closed at the first Replace
	once   sync.Once
}

func newKeyStore() *keyStore {
	return &keyStore{keys: map[string]struct{}{}, synced: make(chan struct{})}
}

func (s *keyStore) set(obj any, keep bool) error {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if keep {
		s.keys[key] = struct{}{}
	} else {
		delete(s.keys, key)
	}
	return nil
}

func (s *keyStore) Add(obj any) error    { return s.set(obj, true) }
func (s *keyStore) Update(obj any) error { return s.set(obj, true) }
func (s *keyStore) Delete(obj any) error { return s.set(obj, false) }
func (s *keyStore) Resync() error        { return nil }

func (s *keyStore) Replace(list []any, _ string) error {
	keys := make(map[string]struct{}, len(list))
	for _, obj := range list {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		keys[key] = struct{}{}
	}
	s.mu.Lock()
	s.keys = keys
	s.mu.Unlock()
	s.once.Do(func() { close(s.synced) })
	return nil
}

func (s *keyStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
