package masking // import "github.com/svc/svc-collector/pkg/masking"

// luhnValid reports whether the digits of s (spaces and dashes ignored) pass the Luhn checksum.
func luhnValid(s string) bool {
	sum, double, digits := 0, false, 0
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if !isDigit(c) {
			continue
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
		digits++
	}
	return digits >= 13 && sum%10 == 0
}

// phoneDigits accepts a phone match with 9 to 15 digits (E.164 allows at most 15).
func phoneDigits(s string) bool {
	n := 0
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			n++
		}
	}
	return n >= 9 && n <= 15
}

// ibanLengths is the length of the IBAN of each country of the IBAN registry (SWIFT).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
	"BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
	"DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
	"GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
	"IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
	"LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
	"PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
	"SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
	"TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

// ibanValid checks an IBAN match (spaces ignored): registry country and length, and the
// ISO 7064 mod-97 check (the number with its first four characters moved to the end, letters
// as 10..35, leaves remainder 1).
func ibanValid(s string) bool {
	var buf [34]byte
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			continue
		}
		if n == len(buf) {
			return false
		}
		buf[n] = s[i]
		n++
	}
	if n < 4 || ibanLengths[string(buf[:2])] != n {
		return false
	}
	rem := 0
	for i := range n {
		c := buf[(i+4)%n]
		switch {
		case isDigit(c):
			rem = (rem*10 + int(c-'0')) % 97
		case isUpper(c):
			rem = (rem*100 + int(c-'A') + 10) % 97
		default:
			return false
		}
	}
	return rem == 1
}
