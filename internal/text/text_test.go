package text

import "testing"

func TestTruncate(t *testing.T) {
	tests := []struct {
		given  string
		n      int
		expect string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"too long", 3, "too…"},
		{"aé", 2, "a…"}, // é is two bytes: never cut inside it
		{"éé", 3, "é…"},
		{"", 0, ""},
	}
	for _, tt := range tests {
		if got := Truncate(tt.given, tt.n); got != tt.expect {
			t.Errorf("Truncate(%q, %d) = %q, expect %q", tt.given, tt.n, got, tt.expect)
		}
	}
}
