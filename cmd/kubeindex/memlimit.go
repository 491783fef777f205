package main

import (
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryFiles are where a container's memory limit is found: cgroup v2,
// then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimitShare leaves room for what the Go runtime does not count
// (stacks of cgo, the kernel's page cache attributed to us).
const memoryLimitShare = 0.9

// setMemoryLimit makes the Go GC aim below the container's memory limit, so
// that a cache growing towards the limit triggers collection instead of the
// OOM killer. An explicit GOMEMLIMIT wins. It returns the limit set, or 0.
func setMemoryLimit(getenv func(string) string, readFile func(string) ([]byte, error)) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, f := range cgroupMemoryFiles {
		data, err := readFile(f)
		if err != nil {
			continue
		}
		limit, ok := parseCgroupLimit(string(data))
		if !ok {
			return 0
		}
		soft := int64(float64(limit) * memoryLimitShare)
		debug.SetMemoryLimit(soft)
		return soft
	}
	return 0
}

// parseCgroupLimit reads a cgroup memory limit; "max" and the v1 "no limit"
// value (close to MaxInt64) mean unlimited.
func parseCgroupLimit(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}
