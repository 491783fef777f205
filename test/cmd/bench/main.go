// Command bench is make bench: it starts the real test cluster, seeds it
// with -pods realistic pods and prints kubeindex's figures beside their
// comparisons (see package bench), writing them as JSON to -out.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubeindex/kubeindex/test/bench"
	"github.com/kubeindex/kubeindex/test/cluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var o bench.Options
	flag.IntVar(&o.Pods, "pods", 50000, "pods to seed")
	flag.IntVar(&o.Rounds, "rounds", 5, "rounds per figure (3 at most for sync and churn figures)")
	flag.IntVar(&o.Concurrency, "concurrency", 16, "concurrent requests of the requests/s figures")
	flag.DurationVar(&o.RoundTime, "round-time", 2*time.Second, "length of one requests/s round")
	flag.IntVar(&o.Subscribers, "subscribers", 1000, "WebSocket subscribers of the fan-out; idle streams of the idle figure")
	flag.IntVar(&o.ChurnRate, "churn-rate", 150, "pod updates per second during the fan-out")
	flag.IntVar(&o.LightChurnRate, "light-churn-rate", 30, "pod updates per second of the fan-out's light rounds (event-to-client delay off saturation)")
	flag.DurationVar(&o.ChurnTime, "churn-time", 5*time.Second, "length of one fan-out churn round")
	flag.DurationVar(&o.IdleTime, "idle-time", time.Minute, "how long the idle figure holds its -subscribers streams open with nothing changing")
	floorRates := flag.String("floor-rates", "5,10,20,30,50,75,100,150,200,300,400,600,800", "comma-separated pod updates/s the fan-out ceiling (fanfloor) steps through, each sent to every subscriber")
	flag.DurationVar(&o.FloorStep, "floor-step", 3*time.Second, "length of one fan-out ceiling step")
	flag.IntVar(&o.QuestionPods, "question-pods", 100000, "pods of the questions' own source, the demo's crowd in a fake API server (benchfeed); -1: ask the seeded cluster's -pods")
	flag.IntVar(&o.UpkeepEvents, "upkeep-events", 3000, "pod updates per index upkeep round")
	flag.IntVar(&o.UpkeepRounds, "upkeep-rounds", 0, "index upkeep rounds (0: as the other churn figures, -rounds but at most 3)")
	flag.DurationVar(&o.InformerSyncTimeout, "informer-sync-timeout", 3*time.Minute, "how long the kinformers figure's N informers have to sync before the run records how many did")
	flag.Float64Var(&o.APIServerRSSShare, "informer-rss-share", 0.4, "stop a kinformers round that grew the API server by 5% of the machine's memory when its RSS passes this share of it")
	flag.Float64Var(&o.MinAvailableShare, "informer-min-available", 0.2, "stop a kinformers round that grew the API server by 5% of the machine's memory when the available memory falls below this share of it")
	modes := flag.String("informer-modes", "list,watch-list", "comma-separated ways the kinformers figure's informers sync: list, watch-list")
	flag.StringVar(&o.Dir, "dir", "", "cluster state directory, kept (a rerun with the same -pods skips seeding); default a fresh temporary one")
	builds := flag.String("builds", "", "comma-separated other kubeindex source trees (label=dir or dir) asked beside this one in the sync, rate, latency and upkeep rounds, e.g. a checkout of an earlier commit")
	flag.StringVar(&o.Out, "out", "bench/results.json", "where to write the results as JSON")
	figures := flag.String("figures", "", "comma-separated figures besides the initial sync (rate, latency, heap, fanout, upkeep, kinformers, klist, kwatch, idle, fanfloor, questions, proto, shards, fleet, scale); default all")
	summarize := flag.String("summarize", "", "comma-separated results files of earlier runs: print their Markdown table (each run's ratio, in how many runs each target was met) and run nothing")
	flag.Parse()
	if *summarize != "" {
		var reps []*bench.Report
		for _, path := range strings.Split(*summarize, ",") {
			r, err := bench.ReadReport(path)
			if err != nil {
				return err
			}
			reps = append(reps, r)
		}
		return bench.Summarize(os.Stdout, reps)
	}
	o.Log = os.Stderr
	o.InformerModes = strings.Split(*modes, ",")
	for _, f := range strings.Split(*floorRates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-floor-rates: %q is not a positive number", f)
		}
		o.FloorRates = append(o.FloorRates, n)
	}
	if *builds != "" {
		o.Builds = strings.Split(*builds, ",")
	}
	if *figures != "" {
		o.Figures = strings.Split(*figures, ",")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "kubeindex-bench-cluster-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var c *cluster.Cluster
	if !bench.SimulatedOnly(o.Figures) {
		fmt.Fprintln(os.Stderr, "starting the test cluster in", dir)
		var err error
		if c, err = cluster.Start(ctx, dir); err != nil {
			return err
		}
	}
	rep, err := bench.Run(ctx, c, o)
	if c != nil {
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	rep.Print(os.Stdout)
	if o.Out != "" {
		fmt.Println("results written to", o.Out)
	}
	return err
}
