package masking

import "strings"

// Text used by tests and benchmarks.

// cleanProse is English text of the kind prompts and answers hold, without personal data (it
// has digits, hyphens, capitals and the letter b, which anchor some rules).
const cleanProse = `The quarterly report covers 12 regions and shows a 4.5% increase in revenue compared ` +
	`to the previous period. Our state-of-the-art pipeline processed 1,204 requests per second ` +
	`during the benchmark, with a p99 latency of 230 ms. A follow-up review is scheduled for ` +
	`March 3rd; please bring the updated figures and the draft of the Q2 roadmap. Bob asked ` +
	`whether the new caching layer could be enabled by default in version 2.3, and Alice ` +
	`suggested we first measure its effect on the error budget. `

// piiLine is a line dense with personal data of every builtin kind.
const piiLine = `Contact jane.doe@example.com or +44 20 7946 0958, card 4111 1111 1111 1111, ` +
	`IBAN DE89 3704 0044 0532 0130 00, key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z, ` +
	`AWS AKIAIOSFODNN7EXAMPLE, Authorization: Bearer abcdefgh12345678. `

// repeatTo repeats s to at least n bytes.
func repeatTo(s string, n int) string {
	return strings.Repeat(s, n/len(s)+1)
}
