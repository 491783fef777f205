package bench

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strconv"
	"time"
)

// roundCPU is the CPU a requests/s round cost: the server asked, the
// harness (its client) and the whole machine (every process, the other
// servers and the test cluster included). Requests/s depend on what else
// runs on the machine; the server's CPU per request much less, which is
// why it is logged beside each rate.
type roundCPU struct{ server, client, machine time.Duration }

// takeCPU reads the CPU used so far by the process pid, by the harness,
// and by the machine. A clock that cannot be read reads as zero; the
// figures built from it are then NaN, not wrong.
func takeCPU(pid int) roundCPU {
	var s roundCPU
	s.server, _ = cpuOf(pid)
	s.client, _ = cpuOf(os.Getpid())
	s.machine, _ = machineBusy()
	return s
}

// perRequest is the CPU per request of each part between two readings.
func (s roundCPU) perRequest(after roundCPU, n int64) roundCPU {
	if n <= 0 || s.server == 0 || after.server == 0 {
		return roundCPU{-1, -1, -1}
	}
	per := func(a, b time.Duration) time.Duration {
		if a == 0 || b == 0 {
			return -1
		}
		return (b - a) / time.Duration(n)
	}
	return roundCPU{per(s.server, after.server), per(s.client, after.client), per(s.machine, after.machine)}
}

// usOrNaN is a duration in microseconds; NaN for an unread one (negative).
func usOrNaN(d time.Duration) float64 {
	if d < 0 {
		return math.NaN()
	}
	return float64(d) / float64(time.Microsecond)
}

// machineBusy is the CPU time every CPU of the machine spent not idle
// (the first line of /proc/stat, less idle and iowait), in 10 ms ticks.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	f := bytes.Fields(line)
	if len(f) < 6 || string(f[0]) != "cpu" {
		return 0, errors.New("malformed /proc/stat")
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, err
		}
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are in user already
			continue
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}
