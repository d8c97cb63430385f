package jsontext // import "github.com/svc/svc-collector/pkg/jsontext"

// Scanning kilobytes of input and output text byte by byte dominates masking; these helpers
// skip 8 bytes at a time over text that holds none of the bytes a loop is looking for
// (SIMD-within-a-register). Each returns an index <= the first byte of interest; the caller's
// byte loop continues from there.

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load64 reads the 8 bytes of b as one little-endian word (the compiler makes it one load).
func load64(b string) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// hasByte reports whether any byte of x equals c.
func hasByte(x uint64, c byte) bool {
	y := x ^ (lsb * uint64(c))
	return (y-lsb)&^y&msb != 0
}

// hasLess reports whether any byte of x is below n (n <= 128).
func hasLess(x uint64, n byte) bool {
	return (x-lsb*uint64(n))&^x&msb != 0
}

// skipJSONStringPlain skips 8-byte blocks without '"', '\\' or control characters, the bytes
// that end or complicate a JSON string.
func skipJSONStringPlain(s string, i int) int {
	for i+8 <= len(s) {
		x := load64(s[i : i+8])
		if hasLess(x, 0x20) || hasByte(x, '"') || hasByte(x, '\\') {
			return i
		}
		i += 8
	}
	return i
}

// skipJSONSafeASCII skips 8-byte blocks that AppendString copies as they are: ASCII without
// '"', '\\' or control characters.
func skipJSONSafeASCII(s string, i int) int {
	for i+8 <= len(s) {
		x := load64(s[i : i+8])
		if x&msb != 0 || hasLess(x, 0x20) || hasByte(x, '"') || hasByte(x, '\\') {
			return i
		}
		i += 8
	}
	return i
}
