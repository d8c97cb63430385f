package svcmetadataprocessor // import "github.com/svc/svc-collector/svcmetadataprocessor"

import (
	"strings"
)

// A window lets a builtin rule run its regular expression only on the short runs of text that
// could hold a match, instead of on the whole (often kilobytes long) value. It is exact, not a
// heuristic: a builtin rule's matches consist only of bytes of its window set, so every match
// lies inside one maximal run of such bytes, and the rule is applied to each qualifying run with
// one byte of context on either side (bytes outside the set, which a match cannot include, but
// which \b sees as it would in the whole text). FuzzWindowedRuleEqualsWholeText checks this.
type window struct {
	set asciiSet
	// minLen is the length of the shortest possible match; shorter runs are skipped.
	minLen int
	// next, when set, finds the next byte at or after from that every match contains (or -1);
	// runs are then found from those bytes instead of by scanning every byte.
	next func(s string, from int) int
	// qualifies, when set, is a cheap necessary condition on a run.
	qualifies func(run string) bool
}

// asciiSet is a set of ASCII bytes; bytes >= 0x80 are never in it.
type asciiSet [256]bool

func newASCIISet(ranges ...string) asciiSet {
	var s asciiSet
	for _, r := range ranges {
		if len(r) == 3 && r[1] == '-' {
			for c := r[0]; c <= r[2]; c++ {
				s[c] = true
			}
			continue
		}
		for i := 0; i < len(r); i++ {
			s[r[i]] = true
		}
	}
	return s
}

// replaceWindowed applies rule r (which has a window) to s.
func replaceWindowed(s string, r *maskRule) (string, bool) {
	w := r.window
	var out strings.Builder
	copied, changed := 0, false
	apply := func(start, end int) {
		if w.qualifies != nil && !w.qualifies(s[start:end]) {
			return
		}
		cs, ce := max(start-1, 0), min(end+1, len(s))
		seg := s[cs:ce]
		if !r.re.MatchString(seg) {
			return
		}
		replaced := r.replaceAll(seg)
		if replaced == seg {
			return
		}
		// The context bytes are outside every match, so they come back unchanged: keep only
		// the run's part.
		core := replaced[start-cs : len(replaced)-(ce-end)]
		if !changed {
			out.Grow(len(s))
			changed = true
		}
		out.WriteString(s[copied:start])
		out.WriteString(core)
		copied = end
	}
	if w.next != nil {
		for from := 0; from < len(s); {
			k := w.next(s, from)
			if k < 0 {
				break
			}
			start, end := k, k+1
			for start > from && w.set[s[start-1]] {
				start--
			}
			for end < len(s) && w.set[s[end]] {
				end++
			}
			if end-start >= w.minLen {
				apply(start, end)
			}
			from = end
		}
	} else {
		for i := 0; i < len(s); {
			if !w.set[s[i]] {
				i++
				continue
			}
			j := i + 1
			for j < len(s) && w.set[s[j]] {
				j++
			}
			if j-i >= w.minLen {
				apply(i, j)
			}
			i = j
		}
	}
	if !changed {
		return s, false
	}
	out.WriteString(s[copied:])
	return out.String(), true
}

// nextByte returns a window.next that finds c.
func nextByte(c byte) func(string, int) int {
	return func(s string, from int) int {
		k := strings.IndexByte(s[from:], c)
		if k < 0 {
			return -1
		}
		return from + k
	}
}

// nextDigit finds the next ASCII digit.
func nextDigit(s string, from int) int {
	for i := skipNonDigits(s, from); i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			return i
		}
	}
	return -1
}
