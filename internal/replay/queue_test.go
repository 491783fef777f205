package replay

import (
	"fmt"
	"testing"
)

// The queue is first-in first-out and bounded, whatever the pushes and
// pops interleave with its growing, wrapping around and shrinking.
func TestQueueIsABoundedFIFO(t *testing.T) {
	for _, limit := range []int{1, 3, minRing, minRing + 1, 100} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			var q Queue[int]
			q.SetLimit(limit)
			pushed, popped := 0, 0
			push := func(n int) {
				for range n {
					if ok := q.Push(pushed); ok != (pushed-popped < limit) {
						t.Fatalf("push with %d of %d queued: %v", pushed-popped, limit, ok)
					} else if ok {
						pushed++
					}
				}
			}
			pop := func(n int) {
				for range n {
					v, ok := q.Pop()
					if ok != (popped < pushed) {
						t.Fatalf("pop with %d queued: %v", pushed-popped, ok)
					}
					if !ok {
						return
					}
					if v != popped {
						t.Fatalf("popped %d; expect %d, in order", v, popped)
					}
					popped++
				}
			}
			push(limit + 1) // the last one does not fit
			pop(2)
			push(3)
			var seen []int
			q.Each(func(v int) { seen = append(seen, v) })
			for i, v := range seen {
				if v != popped+i {
					t.Fatalf("Each yields %v; expect %d.. in order", seen, popped)
				}
			}
			pop(limit)
			push(limit)
			pop(limit + 1)
			if q.Len() != 0 || popped != pushed || q.Limit() != limit {
				t.Errorf("%d left, %d pushed, %d popped, limit %d", q.Len(), pushed, popped, q.Limit())
			}
		})
	}
}

// An idle queue holds no ring, and one whose lag is over gives the memory
// of its grown ring back: a queue's memory follows what it holds, not its
// bound.
func TestQueueMemoryFollowsItsContents(t *testing.T) {
	var q Queue[*int]
	q.SetLimit(1024)
	if q.capacity() != 0 {
		t.Fatal("a new queue has a ring")
	}
	q.Push(nil)
	if q.capacity() != minRing {
		t.Errorf("ring of %d after one push; expect %d", q.capacity(), minRing)
	}
	for range 500 {
		q.Push(nil)
	}
	if c := q.capacity(); c < 501 || c > 1024 {
		t.Errorf("ring of %d holding 501", c)
	}
	for q.Len() > 0 {
		q.Pop()
	}
	if q.capacity() != 0 {
		t.Errorf("a drained queue keeps a ring of %d", q.capacity())
	}
	// A consumer that keeps up keeps its small ring: no allocation per item.
	for range 100 {
		q.Push(nil)
		q.Pop()
	}
	if q.capacity() != minRing {
		t.Errorf("ring of %d for a consumer that keeps up; expect %d", q.capacity(), minRing)
	}
	if n := testing.AllocsPerRun(100, func() { q.Push(nil); q.Pop() }); n != 0 {
		t.Errorf("%v allocations per push and pop while keeping up; expect 0", n)
	}
}

// The zero queue takes nothing, rather than growing without bound.
func TestQueueZeroTakesNothing(t *testing.T) {
	var q Queue[int]
	if q.Push(1) {
		t.Error("a queue with no bound set took an item")
	}
}
