package bench

import "testing"

// TestUpkeepRounds: the index upkeep figure runs as many rounds as the
// other churn figures (Rounds, at most 3) unless told more, so that a
// cost or a heap that grows with events can be followed over many.
func TestUpkeepRounds(t *testing.T) {
	for _, tc := range []struct{ rounds, upkeep, want int }{
		{rounds: 5, want: 3}, {rounds: 2, want: 2}, {rounds: 1, upkeep: 15, want: 15}, {rounds: 5, upkeep: 2, want: 2},
	} {
		o := Options{Rounds: tc.rounds, UpkeepRounds: tc.upkeep}.withDefaults()
		if got := o.upkeepRounds(); got != tc.want {
			t.Errorf("Rounds %d, UpkeepRounds %d: %d upkeep rounds, want %d", tc.rounds, tc.upkeep, got, tc.want)
		}
	}
}
