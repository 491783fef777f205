package ipowner

import (
	"fmt"
	"testing"
	"time"
)

// TestReserveMakesTheMapsOnce: fed an initial list of n pods after
// Reserve(n), the table, the mirror and the history make their maps once
// instead of growing them step by step (fewer allocations), and hold what
// they would have held without it; a Reserve on one that holds something
// changes nothing of what it holds.
func TestReserveMakesTheMapsOnce(t *testing.T) {
	const n = 2000
	pods := make([]Holding, n)
	for i := range pods {
		h := podHolding(fmt.Sprintf("u%d", i), false, fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255))
		h.Owner.Phase = "Running"
		pods[i] = h
	}
	type fed interface {
		Reserve(int)
		Observe(Holding)
	}
	for name, newFed := range map[string]func() fed{
		"table":   func() fed { return tableFed{NewTable[*int](Pod)} },
		"mirror":  func() fed { return newTestMirror() },
		"history": func() fed { return newHistory(HistoryOptions{}, func() time.Time { return t0 }) },
	} {
		t.Run(name, func(t *testing.T) {
			allocs := func(reserve bool) float64 {
				return testing.AllocsPerRun(3, func() {
					x := newFed()
					if reserve {
						x.Reserve(n)
					}
					for _, h := range pods {
						x.Observe(h)
					}
				})
			}
			with, without := allocs(true), allocs(false)
			if with >= without-5 {
				t.Errorf("%d pods fed: %v allocations after Reserve, %v without: want the maps' growth gone", n, with, without)
			}
			x := newFed()
			x.Observe(pods[0])
			x.Reserve(n)
			x.Observe(pods[1])
			if got := heldIPs(x); got != 2 {
				t.Errorf("Reserve on one that holds something: %d addresses held after, want 2", got)
			}
		})
	}
}

// tableFed is a Table fed as the cache feeds it.
type tableFed struct{ *Table[*int] }

func (t tableFed) Observe(h Holding) { t.Set(h, nil) }

// heldIPs counts the addresses x holds now.
func heldIPs(x any) int {
	switch x := x.(type) {
	case tableFed:
		return len(x.byIP)
	case *Mirror:
		return len(x.owners)
	case *History:
		return len(x.byIP)
	}
	return -1
}
