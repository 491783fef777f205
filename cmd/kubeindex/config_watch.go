package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/fleet"
	"github.com/kubeindex/kubeindex/server"
)

// configPoll is how often a fleet's configuration file is read again
// besides the file system's notifications, so that a change is applied
// where none come (some network and FUSE mounts, a file that is a symbolic
// link into another directory).
const configPoll = 10 * time.Second

// configSettle gathers the notifications of one edit (an editor's write,
// rename and chmod; a ConfigMap's symbolic link swap) into one reading.
const configSettle = 100 * time.Millisecond

// configWatch applies a fleet's configuration file as it changes: its
// clusters and resources, checked as at start, then handed to the fleet
// (fleet.Fleet.Update), which starts, stops or restarts only the clusters
// that changed. A file that does not pass is refused, said in the log and
// in GET /api/v1/clusters, and the fleet serves on as it was.
//
// The directory is watched, not the file: editors replace the file by a
// rename, and a Kubernetes ConfigMap volume swaps a symbolic link
// (..data) beside it; either way the file's content is read again and
// compared with what was last read. Only the file's resources and
// clusters are read again: flags, and with them identity, limits and
// listening, stay as they were at start.
type configWatch struct {
	cfg      *Config // as read at start
	getenv   func(string) string
	log      *slog.Logger
	fleet    *fleet.Fleet
	clusters func([]member) []fleet.Cluster

	applied, refused []byte // the contents last applied and last refused
	status           server.ConfigStatus
}

func newConfigWatch(cfg *Config, getenv func(string) string, log *slog.Logger, f *fleet.Fleet, clusters func([]member) []fleet.Cluster) *configWatch {
	w := &configWatch{cfg: cfg, getenv: getenv, log: log, fleet: f, clusters: clusters}
	// The file was read a moment ago by parseConfig; what it held then
	// is what serves.
	w.applied, _ = os.ReadFile(cfg.File)
	w.status = server.ConfigStatus{File: cfg.File, Watched: w.watched(), AppliedAt: time.Now()}
	f.SetConfigStatus(w.status)
	return w
}

// watched tells whether the file is watched: it names the clusters or
// their resources, and they are not --demo-clusters' simulated ones
// (whose API servers start with the process).
func (w *configWatch) watched() bool { return w.cfg.DemoClusters == 0 }

// run watches the file until ctx ends. It never fails: without file
// system notifications it reads the file every configPoll.
func (w *configWatch) run(ctx context.Context) error {
	var events <-chan fsnotify.Event
	var errs <-chan error
	fw, err := fsnotify.NewWatcher()
	if err == nil {
		defer fw.Close()
		err = fw.Add(filepath.Dir(w.cfg.File))
	}
	if err != nil {
		w.log.Warn("no file system notifications for the configuration file: it is read again every "+configPoll.String(), "file", w.cfg.File, "err", err)
	} else {
		events, errs = fw.Events, fw.Errors
	}
	w.log.Info("watching the configuration file: a change of its clusters or resources is applied without a restart", "file", w.cfg.File)
	poll := time.NewTicker(configPoll)
	defer poll.Stop()
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if settle == nil {
				settle = time.After(configSettle)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			w.log.Warn("watching the configuration file", "file", w.cfg.File, "err", err)
		case <-settle:
			settle = nil
			w.reload(ctx)
		case <-poll.C:
			w.reload(ctx)
		}
	}
}

// reload reads the file and, when its content changed, applies it or
// refuses it.
func (w *configWatch) reload(ctx context.Context) {
	data, err := os.ReadFile(w.cfg.File)
	switch {
	case err != nil:
		w.refuse(nil, fmt.Errorf("reading --config: %w", err))
		return
	case bytes.Equal(data, w.applied):
		if w.status.Error != "" {
			w.log.Info("the configuration file is back to what serves", "file", w.cfg.File)
			w.refused, w.status.Error, w.status.FailedAt = nil, "", time.Time{}
			w.fleet.SetConfigStatus(w.status)
		}
		return
	case w.refused != nil && bytes.Equal(data, w.refused):
		return
	}
	ch, err := w.apply(ctx, data)
	if err != nil {
		w.refuse(data, err)
		return
	}
	w.applied, w.refused = data, nil
	w.status.AppliedAt, w.status.Reloads, w.status.Error, w.status.FailedAt = time.Now(), w.status.Reloads+1, "", time.Time{}
	w.fleet.SetConfigStatus(w.status)
	w.log.Info("configuration file applied", "file", w.cfg.File,
		"added", ch.Added, "removed", ch.Removed, "restarted", ch.Restarted, "clusters", w.fleet.Names())
}

// apply checks the file's content as a start would, then updates the
// fleet.
func (w *configWatch) apply(ctx context.Context, data []byte) (fleet.Changes, error) {
	next, err := w.cfg.reread(data)
	if err != nil {
		return fleet.Changes{}, err
	}
	members, err := next.members(ctx, w.getenv, w.log, nil)
	if err != nil {
		return fleet.Changes{}, err
	}
	return w.fleet.Update(w.clusters(members))
}

// refuse reports a file that does not pass; data is its content (nil when
// it could not be read), not reported again while it stays the same.
func (w *configWatch) refuse(data []byte, err error) {
	if data == nil && w.status.Error == err.Error() {
		return
	}
	w.refused = data
	w.status.Error, w.status.FailedAt = err.Error(), time.Now()
	w.fleet.SetConfigStatus(w.status)
	w.log.Error("configuration file refused; the clusters serve on as last applied", "file", w.cfg.File, "err", err)
}

// reread is the configuration with the file's resources and clusters as
// data says, checked as at start (Validate). A fleet stays a fleet: a
// file that lists no cluster, where the clusters came from it, is refused.
func (cfg *Config) reread(data []byte) (*Config, error) {
	next := *cfg
	next.Resources, next.Clusters = nil, nil
	if err := next.useFile(data); err != nil {
		return nil, err
	}
	if err := next.addClusterFlags(); err != nil {
		return nil, err
	}
	if !next.fleet() {
		return nil, errors.New("the file lists no clusters: a fleet does not become a single cluster while serving; restart kubeindex for that")
	}
	if err := next.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return &next, nil
}

// memberVersion digests what a cluster is configured with: its entry, the
// resources it caches, the --index flags and how its kubeconfig reaches
// it (server, credentials, TLS). A cluster whose digest changes is
// restarted when the file is applied; a change inside a kubeconfig file
// is seen when the configuration file changes.
func memberVersion(c ClusterConfig, cfg *Config, rc *rest.Config) string {
	access := struct {
		Host, APIPath, Username, Password, BearerToken, BearerTokenFile string
		TLS                                                             rest.TLSClientConfig
		Impersonate                                                     rest.ImpersonationConfig
		Exec, AuthProvider                                              any
		Proxy                                                           bool
	}{rc.Host, rc.APIPath, rc.Username, rc.Password, rc.BearerToken, rc.BearerTokenFile,
		rc.TLSClientConfig, rc.Impersonate, rc.ExecProvider, rc.AuthProvider, rc.Proxy != nil}
	access.TLS.NextProtos = nil
	b, err := json.Marshal(struct {
		Cluster   ClusterConfig
		Resources []ResourceConfig
		Indexes   []IndexFlag
		Access    any
	}{c, cfg.Resources, cfg.IndexFlags, access})
	if err != nil {
		// Every field is plain data; should one not encode, the cluster
		// restarts at each change of the file rather than never.
		return "unversioned " + time.Now().String()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
