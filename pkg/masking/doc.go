// Package masking is the gateway's one masking engine: the processor (span attributes, events,
// links, status) and the score connector (comments, string values, metadata) mask with it, so
// both apply the same rules in the same way.
//
// The builtin rules are defined as regular expressions with a validator (Luhn, mod-97, ...);
// those expressions are the reference. The engine does not run them over the whole text: each
// rule finds the few bytes that can start or anchor a match with a fast scan (strings.IndexByte
// or 8-bytes-at-a-time word tricks), cuts out the short stretch of text that can hold a match
// there, and runs the expression only on that stretch. FuzzEngineEqualsReference checks that
// this gives exactly the result of the expressions applied to the whole text.
package masking // import "github.com/svc/svc-collector/pkg/masking"
