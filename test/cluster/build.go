package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// modulePath is the module holding cmd/testcluster.
const modulePath = "github.com/kubeindex/kubeindex/test"

var built struct {
	sync.Mutex
	path string
}

// Build compiles cmd/testcluster into a stable cache directory and returns
// the binary's path. It is safe to call concurrently, from any number of test
// processes: the first call in a process runs `go build`, which relies on
// Go's build cache and leaves an up-to-date binary untouched, so only the
// very first build on a machine compiles kube-apiserver (minutes); later ones
// take seconds. Later calls in the same process return the same path.
//
// The binary goes under $KUBEINDEX_TESTCLUSTER_CACHE if set, else
// os.UserCacheDir()/kubeindex-testcluster, in a directory named after the
// checkout.
func Build(ctx context.Context) (string, error) {
	built.Lock()
	defer built.Unlock()
	if built.path != "" {
		return built.path, nil
	}
	modDir, err := moduleDir()
	if err != nil {
		return "", err
	}
	binDir, err := cacheDir(modDir)
	if err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(binDir, ".build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()

	bin := filepath.Join(binDir, "testcluster")
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", bin, "./cmd/testcluster")
	cmd.Dir = modDir
	if flags, ok := os.LookupEnv("GOFLAGS"); ok {
		cmd.Env = append(os.Environ(), "GOFLAGS="+withoutRace(flags))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/testcluster in %s: %w\n%s", modDir, err, out.Bytes())
	}
	built.path = bin
	return bin, nil
}

// withoutRace drops -race from GOFLAGS: cmd/testcluster is not built with
// the race detector (see its package documentation).
func withoutRace(goflags string) string {
	var keep []string
	for _, f := range strings.Fields(goflags) {
		if f != "-race" && f != "--race" && f != "-race=true" {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

// cacheDir is where the binary of the module in modDir goes: one directory
// per checkout, so two checkouts never run each other's binary.
func cacheDir(modDir string) (string, error) {
	base := os.Getenv("KUBEINDEX_TESTCLUSTER_CACHE")
	if base == "" {
		if d, err := os.UserCacheDir(); err == nil {
			base = filepath.Join(d, "kubeindex-testcluster")
		} else {
			base = filepath.Join(os.TempDir(), "kubeindex-testcluster")
		}
	}
	sum := sha256.Sum256([]byte(modDir))
	dir := filepath.Join(base, hex.EncodeToString(sum[:6]))
	return dir, os.MkdirAll(dir, 0o755)
}

// moduleDir finds the test module's directory: from this source file's path
// when it is known (no -trimpath), else by walking up from the working
// directory, which `go test` sets to the package's directory.
func moduleDir() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if isTestModule(filepath.Join(d, "go.mod")) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("module %s not found above %v", modulePath, starts)
}

func isTestModule(gomod string) bool {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(first) == "module "+modulePath
}

// goTool is the go command on PATH. `go test` puts its own GOROOT/bin first
// on the test's PATH, so the binary is built by the toolchain running the
// tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// lockFile takes an exclusive flock on path; two test binaries building at
// once would otherwise race to write the same output file.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
