//go:build !race

// Command testcluster runs a real, single-process Kubernetes control plane for
// end-to-end tests: an embedded etcd and a kube-apiserver built from the
// k8s.io/kubernetes module, both listening on 127.0.0.1 only.
//
// Everything it needs (ports, certificates, keys, the admin token, etcd data)
// lives under --dir and is created on the first start, then reused, so a
// restart with the same --dir keeps the data and the kubeconfig valid.
//
// When the API server answers /readyz, it prints one line to stdout:
//
//	READY <path to kubeconfig>
//
// SIGTERM or SIGINT stops the API server gracefully, then etcd. Arguments after
// "--" are passed to kube-apiserver as they are, after the defaults, so they
// override them.
//
// It is never built with -race (hence the build constraint): a race-enabled
// kube-apiserver takes a quarter of an hour to compile on a small machine and
// tells nothing about kubeindex; the constraint also keeps
// `go test -race ./...` from compiling it.
//
// No controller-manager, scheduler or kubelet runs: nothing creates default
// ServiceAccounts, schedules pods or writes their status; clients do that
// themselves (see package cluster).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		os.Exit(1)
	}
}

// options are the command line of testcluster.
type options struct {
	dir       string
	port      int
	etcdFsync bool
	apiserver []string
}

func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("testcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dir, "dir", "", "state directory: etcd data, certificates, tokens, kubeconfig (required)")
	fs.IntVar(&o.port, "port", 0, "API server port on 127.0.0.1; 0 reuses the port saved in --dir, or picks a free one")
	fs.BoolVar(&o.etcdFsync, "etcd-fsync", false, "fsync etcd writes (off by default: faster, and a test cluster survives graceful restarts without it)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: testcluster --dir DIR [--port N] [-- kube-apiserver flags...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.dir == "" {
		fs.Usage()
		return o, errors.New("--dir is required")
	}
	if o.port < 0 || o.port > 65535 {
		return o, fmt.Errorf("--port %d: out of range", o.port)
	}
	o.apiserver = fs.Args()
	// Absolute paths keep the kubeconfig path printed in READY, and the
	// files the API server is given, valid from any working directory.
	var err error
	o.dir, err = filepath.Abs(o.dir)
	return o, err
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	if err := lockDir(o.dir); err != nil {
		return err
	}
	st, err := loadOrInitState(o.dir, o.port)
	if err != nil {
		return err
	}
	files, err := ensurePKI(o.dir)
	if err != nil {
		return err
	}
	kubeconfig, err := writeKubeconfig(o.dir, st.APIServerPort, files)
	if err != nil {
		return err
	}

	etcd, err := startEtcd(ctx, etcdConfig{
		dataDir:    files.etcdDir,
		clientPort: st.EtcdClientPort,
		peerPort:   st.EtcdPeerPort,
		fsync:      o.etcdFsync,
	})
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	api := startAPIServer(apiServerArgs(st, files, o.apiserver))
	if err := waitReady(ctx, kubeconfig, api, etcd.Err()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "READY %s\n", kubeconfig)

	select {
	case <-ctx.Done():
		// The API server saw the same signal and is shutting down.
		return api.wait()
	case <-api.done:
		return fmt.Errorf("kube-apiserver exited: %v", api.err)
	case err := <-etcd.Err():
		return fmt.Errorf("etcd failed: %w", err)
	}
}
