// Package ids makes the seeded identifiers the simulated cluster gives its
// objects: UIDs and generated-name suffixes, as an API server makes them.
// The same seed gives the same identifiers, which the demo's golden record
// relies on.
package ids

import (
	"fmt"
	"math/rand/v2"
)

// nameAlphabet is the alphabet Kubernetes uses for generated name suffixes
// (no vowels, no look-alike digits).
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// UID returns a random version-4 UUID drawn from rng.
func UID(rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Suffix returns n random characters of nameAlphabet drawn from rng.
func Suffix(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = nameAlphabet[rng.IntN(len(nameAlphabet))]
	}
	return string(b)
}
