package cluster

import "syscall"

// sysProcAttr makes the kernel send SIGTERM to the cluster when the process
// that started it dies (a panicking or killed test binary), so no cluster
// outlives its tests.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
