//go:build !race

package main

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

type etcdConfig struct {
	dataDir    string
	clientPort int
	peerPort   int
	fsync      bool
}

// etcdStartTimeout bounds how long a single-member etcd may take to elect
// itself leader; on a loaded 2-core machine that is still well under a second.
const etcdStartTimeout = time.Minute

func loopbackURL(port int) url.URL {
	return url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}

// startEtcd starts a single-member etcd on loopback, plain HTTP (nothing but
// this process talks to it), and returns once it serves requests. The caller
// must Close it.
func startEtcd(ctx context.Context, c etcdConfig) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "testcluster"
	cfg.Dir = c.dataDir
	cfg.ListenClientUrls = []url.URL{loopbackURL(c.clientPort)}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{loopbackURL(c.peerPort)}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.LogLevel = "error" // "warn" logs every request that touches a new key
	cfg.LogOutputs = []string{"stderr"}
	// Without fsync a graceful stop still flushes everything; only a crash
	// of the machine could lose writes, which a test cluster can afford.
	cfg.UnsafeNoFsync = !c.fsync

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(etcdStartTimeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-t.C:
		e.Server.Stop()
		e.Close()
		return nil, errors.New("not ready after " + etcdStartTimeout.String())
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}
