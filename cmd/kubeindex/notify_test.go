package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNotifyReady(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listen string // the socket's address as net.ListenUnixgram takes it
	}{
		{"path", filepath.Join(t.TempDir(), "notify")},
		{"abstract", fmt.Sprintf("@kubeindex-test-%d", os.Getpid())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.listen
			conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: tc.listen, Net: "unixgram"})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := notifyReady(env(map[string]string{"NOTIFY_SOCKET": name})); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(buf[:n]); got != "READY=1" {
				t.Fatalf("datagram %q, want READY=1", got)
			}
		})
	}
}

func TestNotifyReadyWithoutSocket(t *testing.T) {
	if err := notifyReady(env(nil)); err != nil {
		t.Fatalf("no NOTIFY_SOCKET: %v, want nothing done", err)
	}
	missing := filepath.Join(t.TempDir(), "absent")
	if err := notifyReady(env(map[string]string{"NOTIFY_SOCKET": missing})); err == nil {
		t.Fatal("a socket nobody listens on: no error")
	}
}

// TestRunNotifiesReady: kubeindex sends READY=1 once, when its cache has
// synced, and not before: /readyz answers 200 when the datagram arrives.
func TestRunNotifiesReady(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--demo", "--listen", addr}, env(map[string]string{"NOTIFY_SOCKET": sock}), io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run after cancel: %v", err)
		}
	}()
	buf := make([]byte, 64)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != "READY=1" {
		t.Fatalf("datagram %q, want READY=1", got)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz %s after READY=1, want 200", resp.Status)
	}
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := conn.Read(buf); err == nil {
		t.Errorf("a second datagram %q: readiness is notified once", buf[:n])
	}
}
