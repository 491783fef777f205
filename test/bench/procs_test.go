package bench

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// burn keeps one goroutine on the CPU until the process's CPU, as cpuOf
// reads it, has grown by d, or for at most 5 s of wall time: a cpuOf that
// stopped counting fails the test instead of hanging it.
func burn(d time.Duration) {
	start, _ := cpuOf(os.Getpid())
	deadline := time.Now().Add(5 * time.Second)
	for x := 0; ; x++ {
		if x%10000 == 0 {
			if now, _ := cpuOf(os.Getpid()); now-start >= d || time.Now().After(deadline) {
				return
			}
		}
	}
}

// A round that costs a process less than /proc's 10 ms tick still reads as
// CPU spent: the upkeep round of a tiny cluster once read 0 µs per event
// for the process without indexes, and its ratio as not computable.
func TestCPUOfCountsBelowATick(t *testing.T) {
	c0, err := cpuOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	burn(2 * time.Millisecond)
	c1, err := cpuOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := c1 - c0; d < 2*time.Millisecond || d%(10*time.Millisecond) == 0 {
		t.Errorf("2 ms of CPU read as %v: not the process's CPU clock", d)
	}
}

// The clock and /proc's ticks count the same CPU.
func TestCPUOfAgreesWithProcTicks(t *testing.T) {
	pid := os.Getpid()
	c0, err1 := cpuOf(pid)
	t0, err2 := ticksOf(pid)
	if err := firstErr(err1, err2); err != nil {
		t.Fatal(err)
	}
	burn(300 * time.Millisecond)
	c1, err1 := cpuOf(pid)
	t1, err2 := ticksOf(pid)
	if err := firstErr(err1, err2); err != nil {
		t.Fatal(err)
	}
	clock, ticks := c1-c0, t1-t0
	if diff := (clock - ticks).Abs(); diff > 30*time.Millisecond+clock/10 {
		t.Errorf("the CPU clock read %v, /proc %v", clock, ticks)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if d, err := cpuOf(gone.Process.Pid); err == nil {
		t.Errorf("the CPU of a process that ended read as %v, without an error", d)
	}
}
