// Package kubeindexbin builds the kubeindex binary for tests that run it as
// a user would: once per test binary, from the repository this module sits in.
package kubeindexbin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Module is the service's module path, which marks the repository root.
const Module = "github.com/kubeindex/kubeindex"

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds cmd/kubeindex on first use and returns the binary's path.
// Safe for concurrent use; every caller gets the same binary. Call Remove
// from TestMain when the tests are done.
func Path() (string, error) {
	built.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			built.err = err
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "kubeindex-bin-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "kubeindex")
		cmd := exec.Command("go", "build", "-o", built.path, "./cmd/kubeindex")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/kubeindex in %s: %v\n%s", root, err, out)
		}
	})
	return built.path, built.err
}

// Remove deletes the built binary, if any.
func Remove() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// RepoRoot walks up from the working directory (go test runs in the
// package's directory) to the kubeindex module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module "+Module+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no " + Module + " go.mod above the working directory")
		}
		dir = parent
	}
}
