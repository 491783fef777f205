//go:build !linux

package cluster

import "syscall"

// sysProcAttr: only Linux has a parent-death signal; elsewhere a cluster
// whose test binary died must be stopped by hand.
func sysProcAttr() *syscall.SysProcAttr { return nil }
