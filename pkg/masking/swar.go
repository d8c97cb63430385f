package masking // import "github.com/svc/svc-collector/pkg/masking"

// Scanning kilobytes of text byte by byte would dominate masking; these helpers look at 8 bytes
// at a time (SIMD within a register) and skip blocks that hold none of the bytes a rule can be
// anchored on. Each returns an index <= the first byte of interest; the caller's byte loop
// continues from there.

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load64 reads the 8 bytes at s[i:] as one little-endian word (the compiler makes it one load).
func load64(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// zeroBytes has the high bit set in (at least) the lowest byte of y that is zero, and in no byte
// below it; a nonzero result means y holds a zero byte.
func zeroBytes(y uint64) uint64 { return (y - lsb) &^ y & msb }

// hasByte reports whether any byte of x equals c.
func hasByte(x uint64, c byte) bool { return zeroBytes(x^(lsb*uint64(c))) != 0 }

// hasLess reports whether any byte of x is below n (n <= 128).
func hasLess(x uint64, n byte) bool { return (x-lsb*uint64(n))&^x&msb != 0 }

// hasDigit reports whether any byte of x is an ASCII digit.
func hasDigit(x uint64) bool {
	// Test on the low 7 bits so that bytes >= 0x80 (not digits) cannot borrow into a
	// neighbour; then drop bytes whose high bit was set.
	low := x &^ msb
	geZero := (low + lsb*(0x80-'0')) & msb // high bit set where low7 >= '0'
	leNine := (lsb*(0x80+'9') - low) & msb // high bit set where low7 <= '9'
	return geZero&leNine&^x != 0
}

// skipNonDigits skips 8-byte blocks without an ASCII digit.
func skipNonDigits(s string, i int) int {
	for i+8 <= len(s) && !hasDigit(load64(s, i)) {
		i += 8
	}
	return i
}

// skipWithout2 skips 8-byte blocks that hold neither a nor b.
func skipWithout2(s string, i int, a, b byte) int {
	for i+8 <= len(s) {
		x := load64(s, i)
		if hasByte(x, a) || hasByte(x, b) {
			return i
		}
		i += 8
	}
	return i
}

// skipWithout4 skips 8-byte blocks that hold none of a, b, c, d.
func skipWithout4(s string, i int, a, b, c, d byte) int {
	for i+8 <= len(s) {
		x := load64(s, i)
		if zeroBytes(x^(lsb*uint64(a)))|zeroBytes(x^(lsb*uint64(b)))|zeroBytes(x^(lsb*uint64(c)))|zeroBytes(x^(lsb*uint64(d))) != 0 {
			return i
		}
		i += 8
	}
	return i
}

// skipJSONStringPlain skips 8-byte blocks without '"', '\\' or control characters, the bytes
// that end or complicate a JSON string.
func skipJSONStringPlain(s string, i int) int {
	for i+8 <= len(s) {
		x := load64(s, i)
		if hasLess(x, 0x20) || hasByte(x, '"') || hasByte(x, '\\') {
			return i
		}
		i += 8
	}
	return i
}

// skipJSONSafeASCII skips 8-byte blocks that appendJSONString copies as they are: ASCII without
// '"', '\\' or control characters.
func skipJSONSafeASCII(s string, i int) int {
	for i+8 <= len(s) {
		x := load64(s, i)
		if x&msb != 0 || hasLess(x, 0x20) || hasByte(x, '"') || hasByte(x, '\\') {
			return i
		}
		i += 8
	}
	return i
}
