package replay

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkFanout is one event's way through the primitive: appended to
// the log, offered to every member, taken by each consumer.
func BenchmarkFanout(b *testing.B) {
	for _, members := range []int{1, 100, 1000} {
		b.Run(fmt.Sprint(members, " members"), func(b *testing.B) {
			l := NewLog[*int](4096, 5*time.Minute)
			var f Fanout[*member, int]
			ms := make([]*member, members)
			for i := range ms {
				ms[i], _ = newMember("m", 1024)
				f.Add(ms[i])
			}
			at := time.Now()
			ev := 0
			b.ReportAllocs()
			for b.Loop() {
				l.Append(uint64(ev+1), at, &ev)
				for s := range f.All() {
					f.Offer(s, ev)
				}
				for _, m := range ms {
					m.box.Take()
				}
				ev++
			}
		})
	}
}
