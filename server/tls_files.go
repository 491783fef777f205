package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"
)

// fileStamp is what says a file changed: its size and modification time,
// read through symbolic links (a Secret volume swaps a link to a new
// directory; the files it names are new).
type fileStamp struct {
	size int64
	mod  time.Time
}

// reloading holds what was read from some files and reads it again when
// they change. Changes are looked for at most once per recheck, on the
// goroutine that asks (a TLS handshake): no goroutine of its own. A read
// that fails (a file half written, a key not matching its certificate
// yet) keeps the last good value and is tried again at the next check.
// Safe for concurrent use.
type reloading[T any] struct {
	paths   []string
	load    func() (T, error)
	recheck time.Duration
	log     *slog.Logger
	what    string // for the log: "serving certificate", "client CA"

	mu      sync.Mutex
	current T
	stamps  []fileStamp
	checked time.Time
	failed  []fileStamp // the stamps of the last failed read, logged once
}

// newReloading reads the files once: an error here stops start-up.
func newReloading[T any](what string, recheck time.Duration, log *slog.Logger, load func() (T, error), paths ...string) (*reloading[T], error) {
	r := &reloading[T]{paths: paths, load: load, recheck: recheck, log: log, what: what}
	stamps, err := r.stat()
	if err != nil {
		return nil, err
	}
	if r.current, err = load(); err != nil {
		return nil, err
	}
	r.stamps, r.checked = stamps, time.Now()
	return r, nil
}

func (r *reloading[T]) stat() ([]fileStamp, error) {
	stamps := make([]fileStamp, len(r.paths))
	for i, p := range r.paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		stamps[i] = fileStamp{size: fi.Size(), mod: fi.ModTime()}
	}
	return stamps, nil
}

// get returns the current value, read again first if the files changed
// since they were last read and recheck has passed since the last look.
func (r *reloading[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= r.recheck {
		r.checked = now
		r.reload()
	}
	return r.current
}

// reload (under mu) reads the files again if they changed.
func (r *reloading[T]) reload() {
	stamps, err := r.stat()
	if err == nil && equalStamps(stamps, r.stamps) {
		return
	}
	if err == nil {
		var v T
		if v, err = r.load(); err == nil {
			r.current, r.stamps, r.failed = v, stamps, nil
			r.log.Info("read again after its files changed", "what", r.what, "files", r.paths)
			return
		}
	}
	if stamps == nil || !equalStamps(stamps, r.failed) {
		r.failed = stamps
		r.log.Warn("files changed but cannot be read; the previous one is still used", "what", r.what, "files", r.paths, "err", err)
	}
}

func equalStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].size != b[i].size || !a[i].mod.Equal(b[i].mod) {
			return false
		}
	}
	return true
}

// loadKeyPair reads a serving certificate (with its chain) and its key.
func loadKeyPair(certFile, keyFile string) func() (*tls.Certificate, error) {
	return func() (*tls.Certificate, error) {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		return &kp, nil
	}
}

// loadCertPool reads a PEM bundle of CA certificates; one that holds
// none is an error, not a pool that trusts nobody.
func loadCertPool(file string) func() (*x509.CertPool, error) {
	return func() (*x509.CertPool, error) {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("no PEM certificate in " + file)
		}
		return pool, nil
	}
}
