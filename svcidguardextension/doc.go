// Package svcidguardextension is the receiver middleware `svcidguard`: it refuses spans whose trace
// id or span id is empty or all zero at the door, alone, and answers their sender with an OTLP
// partial success (rejected count and the reason), while the rest of the request goes on. The
// platform would store such a span under an empty id and lose it, and one malformed span in a
// request sent on costs every span of that request.
//
//go:generate go tool mdatagen metadata.yaml
package svcidguardextension // import "github.com/svc/svc-collector/svcidguardextension"
