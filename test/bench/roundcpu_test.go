package bench

import (
	"math"
	"os"
	"testing"
	"time"
)

func TestRoundCPU(t *testing.T) {
	before := takeCPU(os.Getpid())
	if before.server <= 0 || before.client <= 0 || before.machine <= 0 {
		t.Fatalf("clocks not read: %+v", before)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	after := takeCPU(os.Getpid())
	per := before.perRequest(after, 10)
	if per.server <= 0 || per.client <= 0 || per.machine <= 0 {
		t.Errorf("the harness's own CPU per request: %+v", per)
	}
	if per := before.perRequest(after, 0); !math.IsNaN(usOrNaN(per.server)) {
		t.Errorf("no request: %+v, want unread", per)
	}
	if got := usOrNaN(1500 * time.Nanosecond); got != 1.5 {
		t.Errorf("usOrNaN(1.5µs) = %v", got)
	}
}
