package main

import (
	"fmt"
	"net"
)

// notifyReady tells a supervisor that waits on it that kubeindex is ready
// (every resource synced), by sd_notify(3)'s protocol: the datagram
// "READY=1" to the Unix socket named by NOTIFY_SOCKET (a name starting
// with "@" is in Linux's abstract namespace). systemd's Type=notify units
// wait on it, and so does make bench's initial sync, which reads the
// process's CPU when it arrives rather than polling /readyz, whose answers
// would fall inside what it measures. Without NOTIFY_SOCKET it does
// nothing. go-systemd's daemon.SdNotify sends the same datagram but reads
// the process's environment, not run's getenv.
func notifyReady(getenv func(string) string) error {
	name := getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	// Go's net package takes a leading "@" for the abstract namespace.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("NOTIFY_SOCKET %q: %w", name, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("READY=1")); err != nil {
		return fmt.Errorf("NOTIFY_SOCKET %q: %w", name, err)
	}
	return nil
}
