package jsonscan

import (
	"encoding/json"
	"testing"
)

// FuzzAppendString: AppendString and StringLen agree with encoding/json for
// any string, plain or not.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "pods", "10.0.0.1", `a"b`, `a\b`, "<&>", "tab\there", "\x00\x1f", "é", "\u2028", "\xff", "v1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendString(%q) = %s, encoding/json %s", s, got[1:], want)
		}
		if n := StringLen(s); n != len(want) {
			t.Errorf("StringLen(%q) = %d, encoding/json %d", s, n, len(want))
		}
	})
}
