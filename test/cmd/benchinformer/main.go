// Command benchinformer is make bench's reference client: a typed client-go
// pod informer, as a controller would run one, in a process of its own. It
// syncs the pods matching -selector and prints
//
//	SYNCED
//	HEAP <bytes>
//
// SYNCED as soon as the informer has synced (the harness reads this
// process's CPU time then), HEAP the live heap the informer added, after
// forced GCs. Then it waits to be killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	selector := flag.String("selector", "", "label selector of the pods to cache")
	flag.Parse()
	if err := run(*kubeconfig, *selector); err != nil {
		fmt.Fprintln(os.Stderr, "benchinformer:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, selector string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// kubernetes.NewForConfig's defaults, as most controllers use them:
	// typed clients of built-in types speak protobuf. No client-side
	// throttling in the way of a list.
	cfg.QPS, cfg.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	pods := factory.Core().V1().Pods().Informer()
	base := heapAfterGC()
	ctx := context.Background()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		return fmt.Errorf("not synced")
	}
	fmt.Println("SYNCED")
	fmt.Printf("HEAP %d\n", int64(heapAfterGC())-int64(base))
	fmt.Printf("COUNT %d\n", len(pods.GetStore().ListKeys()))
	for {
		time.Sleep(time.Hour)
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
