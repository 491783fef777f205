// Package text holds small string helpers shared by the packages.
package text

import "unicode/utf8"

// Truncate keeps an echoed value short (a hostile one may be megabytes):
// at most n bytes of s, cut on a character boundary, then "…" when
// anything was cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
