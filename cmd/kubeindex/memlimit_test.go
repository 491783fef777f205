package main

import (
	"errors"
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if v, ok := m[p]; ok {
				return []byte(v), nil
			}
			return nil, errors.New("no such file")
		}
	}
	tests := []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  int64
	}{
		{"cgroup v2 limit", nil, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824\n"}, 966367641},
		{"cgroup v1 limit", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912"}, 483183820},
		{"unlimited v2", nil, map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, 0},
		{"unlimited v1", nil, map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}, 0},
		{"no cgroup", nil, nil, 0},
		{"GOMEMLIMIT wins", map[string]string{"GOMEMLIMIT": "100MiB"}, map[string]string{"/sys/fs/cgroup/memory.max": "1073741824"}, 0},
	}
	for _, tt := range tests {
		if got := setMemoryLimit(env(tt.env), files(tt.files)); got != tt.want {
			t.Errorf("%s: %d; expect %d", tt.name, got, tt.want)
		}
	}
}
