//go:build !race

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// stateFile holds the ports chosen on the first start. Reusing them on a
// restart keeps clients' kubeconfigs valid and etcd's member URLs unchanged.
const stateFile = "state.json"

type state struct {
	APIServerPort  int `json:"apiserverPort"`
	EtcdClientPort int `json:"etcdClientPort"`
	EtcdPeerPort   int `json:"etcdPeerPort"`
}

// loadOrInitState reads dir/state.json, picks free ports for whatever is not
// set yet, lets a non-zero apiPort override the saved one, and saves the
// result.
func loadOrInitState(dir string, apiPort int) (state, error) {
	var st state
	path := filepath.Join(dir, stateFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &st); err != nil {
			return st, fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return st, err
	}
	if apiPort != 0 {
		st.APIServerPort = apiPort
	}
	for _, p := range []*int{&st.APIServerPort, &st.EtcdClientPort, &st.EtcdPeerPort} {
		if *p != 0 {
			continue
		}
		if *p, err = freePort(); err != nil {
			return st, err
		}
	}
	b, err = json.MarshalIndent(st, "", "  ")
	if err != nil {
		return st, err
	}
	return st, writeFileAtomic(path, append(b, '\n'), 0o600)
}

// lockDir takes an exclusive lock on dir for this process's lifetime (the
// kernel drops it when the process exits). Two clusters on one data dir
// would corrupt each other; the second fails at once instead.
func lockDir(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("%s is in use by another testcluster: %w", dir, err)
	}
	return nil // f stays open, holding the lock, until the process exits
}

// freePort asks the kernel for a free port on 127.0.0.1. The port is released
// before it is used, so another process could take it in between; on a test
// machine that race is rare, and losing it fails start-up loudly.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeFileAtomic writes through a temporary file and a rename, so a reader
// (or a crash) never sees half a file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
