package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// restartClients is how many stream clients follow kubeindex through its
// SIGKILL and restart.
const restartClients = 500

// restartMemLimit is the GOMEMLIMIT kubeindex runs with in
// TestRestartUnderLoad: the re-sync of every client at once must fit in it.
const restartMemLimit = 256 << 20

// TestRestartUnderLoad kills kubeindex with SIGKILL while 500 clients
// follow a churn over SSE, and starts it again on the same address. Each
// client reconnects by itself, from its last position: the new process
// never held it, so it is told RESYNC_REQUIRED (or refused while it
// syncs), takes a new snapshot and carries on. Every client must end
// holding exactly the API server's pods, with no stream having broken its
// promises, and the new process's peak memory (VmHWM) during the
// reconnection storm must stay within its GOMEMLIMIT.
func TestRestartUnderLoad(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{Namespaces: 1, Nodes: 2, Replicas: 3, Widgets: 1})
	api := newAPIServer(t, c)
	ctx := t.Context()
	ns := seeded.Namespaces[0]
	pods := cs.CoreV1().Pods(ns)
	env := []string{"GOMEMLIMIT=" + strconv.Itoa(restartMemLimit)}

	// One test process holds every client: allow it as many streams.
	args := []string{"--kubeconfig", c.Kubeconfig, "--max-streams-per-client", strconv.Itoa(2 * restartClients)}
	k := launchKubeindexEnv(t, env, args...)
	k.waitReady(t, readyTimeout)
	addr := k.hostPort(t)

	// The clients, each reconnecting to the same address until told to stop.
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	clients := make([]*hopper, restartClients)
	var wg sync.WaitGroup
	var mu sync.Mutex // guards current
	current := k
	for i := range clients {
		h := &hopper{ns: ns, objects: map[string]string{}}
		clients[i] = h
		wg.Go(func() {
			for followCtx.Err() == nil {
				mu.Lock()
				target := current
				mu.Unlock()
				if err := h.follow(followCtx, target, -1); err != nil {
					time.Sleep(100 * time.Millisecond) // a client's retry pace
				}
			}
		})
	}
	eventually(t, converge, "every client to sync", func() error {
		for i, h := range clients {
			h.mu.Lock()
			synced := h.synced
			h.mu.Unlock()
			if !synced {
				return fmt.Errorf("client %d has not synced", i)
			}
		}
		return nil
	})

	churned := make(chan struct{})
	go func() {
		defer close(churned)
		churnPods(t, pods, ns, 60, 50*time.Millisecond)
	}()
	time.Sleep(time.Second) // into the churn: a pace, not a wait
	k.kill(t)
	k2 := launchKubeindexEnv(t, env, append(args, "--listen", addr)...)
	mu.Lock()
	current = k2
	mu.Unlock()
	<-churned

	eventually(t, 2*converge, "every client to hold the API server's pods", func() error {
		want, err := api.list(ctx, podsR, ns, nil)
		if err != nil {
			return err
		}
		for i, h := range clients {
			if err := h.holds(want); err != nil {
				return fmt.Errorf("client %d: %w", i, err)
			}
		}
		return nil
	})
	stopFollowing()
	wg.Wait()

	resyncs := 0
	for _, h := range clients {
		resyncs += h.resyncs
	}
	hwm := peakRSS(t, k2.cmd.Process.Pid)
	t.Logf("%d clients, %d told to resync after the restart; the new process's peak RSS %d MiB (GOMEMLIMIT %d MiB)",
		len(clients), resyncs, hwm>>20, restartMemLimit>>20)
	if hwm > restartMemLimit {
		t.Errorf("peak RSS %d MiB during the re-sync is over the GOMEMLIMIT of %d MiB", hwm>>20, restartMemLimit>>20)
	}
}

// peakRSS is a process's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
