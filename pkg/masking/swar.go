package masking // import "github.com/svc/svc-collector/pkg/masking"

// Digits anchor the card_number and iban rules and cannot be found with one strings.IndexByte;
// this helper looks at 8 bytes at a time (SIMD within a register) and skips blocks without a
// digit. It returns an index <= the first digit; the caller's byte loop continues from there.

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
