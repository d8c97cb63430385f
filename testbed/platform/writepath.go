package platform

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Deployment is the platform setting the write path depends on (rules 2 and 4 of README.md,
// "Write path").
type Deployment int

// Deployments. The zero value is the self-hosted default.
const (
	// SelfHosted: the deployment setting (rule 2) writes every request directly.
	SelfHosted Deployment = iota
	// HostedNewOrg: the hosted platform, organization created after the cutoff: non-SDK traffic
	// (rule 4) is written directly.
	HostedNewOrg
	// HostedOldOrg: the hosted platform, organization created before the cutoff: only rules 1
	// and 3 write directly.
	HostedOldOrg
)

var deploymentNames = [...]string{SelfHosted: "self-hosted", HostedNewOrg: "hosted-new-org", HostedOldOrg: "hosted-old-org"}

// String is the deployment's name: self-hosted, hosted-new-org or hosted-old-org.
func (d Deployment) String() string {
	if d >= 0 && int(d) < len(deploymentNames) {
		return deploymentNames[d]
	}
	return "Deployment(" + strconv.Itoa(int(d)) + ")"
}

// ParseDeployment reads a deployment's name.
func ParseDeployment(s string) (Deployment, error) {
	for d, name := range deploymentNames {
		if s == name {
			return Deployment(d), nil
		}
	}
	return 0, fmt.Errorf("unknown deployment %q (self-hosted, hosted-new-org, hosted-old-org)", s)
}

// MarshalText writes the name (JSON of the control API and Stats).
func (d Deployment) MarshalText() ([]byte, error) {
	if _, err := ParseDeployment(d.String()); err != nil {
		return nil, err
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads the name.
func (d *Deployment) UnmarshalText(b []byte) error {
	v, err := ParseDeployment(string(b))
	if err == nil {
		*d = v
	}
	return err
}

// WritePath is how the platform writes an accepted span request (README.md, "Write path").
type WritePath string

// Write paths.
const (
	// WritePathDirect: the events table at once; visible on arrival.
	WritePathDirect WritePath = "direct"
	// WritePathDual: a staging table and a batch job; visible StagedDelay after arrival.
	WritePathDual WritePath = "dual"
)

// DefaultStagedDelay is how long dual-path data stays invisible to the observations API unless
// Options.StagedDelay says otherwise (on the hosted platform: up to about ten minutes).
const DefaultStagedDelay = 2 * time.Second

// NoStagedDelay as Options.StagedDelay makes dual-path data visible at once (its path is still
// decided and recorded).
const NoStagedDelay time.Duration = -1

// Headers the write path reads besides the SDK headers (auth.go).
const (
	// HeaderIngestionVersion is the header the platform's SDKs set to pick a write path.
	HeaderIngestionVersion = "X-Svc-Ingestion-Version"
)

// Rule numbers of the write path (README.md, "Write path"), as recorded in
// RequestRecord.WritePathRule.
const (
	RuleHeaders    = 1 // x-svc-ingestion-version ≥ 4, or a current SDK major in the SDK headers
	RuleDeployment = 2 // self-hosted: everything direct
	RuleScope      = 3 // first scope: svc SDK of a recent enough version, sdk-experiment batch
	RuleNonSDK     = 4 // hosted, new organization, non-SDK traffic
	RuleDefault    = 5 // dual
)

// EnvironmentSDKExperiment is the environment whose batches the scope rule (3) applies to.
const EnvironmentSDKExperiment = "sdk-experiment"

// platformHeader reads a header as the platform's route does: the hyphenated name first, then
// the name with underscores (x_svc_ingestion_version); a present header counts even when empty.
// Names are compared without regard to case: the platform's server lower-cases them, while Go
// canonicalises "x-svc-sdk-name" to "X-Svc-Sdk-Name" but "x_svc_sdk_name" only to
// "X_svc_sdk_name". A repeated header gives its first value.
func platformHeader(h http.Header, name string) (string, bool) {
	for _, n := range []string{name, strings.ReplaceAll(name, "-", "_")} {
		if vs, ok := h[http.CanonicalHeaderKey(n)]; ok && len(vs) > 0 {
			return vs[0], true
		}
		for k, vs := range h {
			if strings.EqualFold(k, n) && len(vs) > 0 {
				return vs[0], true
			}
		}
	}
	return "", false
}

// writeHeaders are the headers of a request that the write path reads.
type writeHeaders struct {
	ingestionVersion string
	sdkName          string
	sdkVersion       string
}

func writeHeadersOf(h http.Header) writeHeaders {
	var w writeHeaders
	w.ingestionVersion, _ = platformHeader(h, HeaderIngestionVersion)
	w.sdkName, _ = platformHeader(h, HeaderSDKName)
	w.sdkVersion, _ = platformHeader(h, HeaderSDKVersion)
	return w
}

// decideWritePath is the platform's rule (README.md, "Write path"), first match. sdkExperiment
// says whether the batch is of the sdk-experiment environment; it is only called when the scope
// rule needs it.
func decideWritePath(td ptrace.Traces, h writeHeaders, dep Deployment, sdkExperiment func() bool) (WritePath, int) {
	switch {
	case headersQualify(h):
		return WritePathDirect, RuleHeaders
	case dep == SelfHosted:
		return WritePathDirect, RuleDeployment
	case scopeQualifies(td, sdkExperiment):
		return WritePathDirect, RuleScope
	case dep == HostedNewOrg && nonSDKTraffic(td, h.sdkName):
		return WritePathDirect, RuleNonSDK
	}
	return WritePathDual, RuleDefault
}

// headersQualify is rule 1: an ingestion version ≥ 4 (values above 4 were refused with 400
// before), or the SDK headers of Python ≥ 4.0.0 or JavaScript ≥ 5.0.0, pre-release and build
// suffixes stripped (4.0.0-rc.1 counts as 4.0.0).
func headersQualify(h writeHeaders) bool {
	if n, err := strconv.Atoi(h.ingestionVersion); err == nil && n >= 4 {
		return true
	}
	base, _, _ := strings.Cut(h.sdkVersion, "-")
	base, _, _ = strings.Cut(base, "+")
	switch h.sdkName {
	case "python":
		return versionAtLeast(base, 4, 0, 0)
	case "javascript":
		return versionAtLeast(base, 5, 0, 0)
	}
	return false
}

// scopeQualifies is rule 3, read on the first scopeSpans of the first resourceSpans only: a
// scope name containing "svc" (any case), a scope version, and telemetry.sdk.language python
// with a version ≥ 3.9.0 or js/javascript ≥ 4.4.0, in a batch of the sdk-experiment
// environment.
func scopeQualifies(td ptrace.Traces, sdkExperiment func() bool) bool {
	if td.ResourceSpans().Len() == 0 || td.ResourceSpans().At(0).ScopeSpans().Len() == 0 {
		return false
	}
	rs := td.ResourceSpans().At(0)
	scope := rs.ScopeSpans().At(0).Scope()
	if !containsSVC(scope.Name()) || scope.Version() == "" {
		return false
	}
	// A pre-release scope version is compared by its numbers (the platform is documented
	// to strip suffixes for the headers only; see README.md, "Write path").
	version, _, _ := strings.Cut(scope.Version(), "-")
	version, _, _ = strings.Cut(version, "+")
	var recent bool
	switch attrString(rs.Resource().Attributes(), "telemetry.sdk.language") {
	case "python":
		recent = versionAtLeast(version, 3, 9, 0)
	case "js", "javascript":
		recent = versionAtLeast(version, 4, 4, 0)
	}
	return recent && sdkExperiment()
}

// nonSDKTraffic is rule 4's condition: no x-svc-sdk-name header (or "unknown") and no scope
// containing "svc" anywhere in the batch.
func nonSDKTraffic(td ptrace.Traces, sdkName string) bool {
	if sdkName != "" && sdkName != "unknown" {
		return false
	}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			if containsSVC(ss.Scope().Name()) {
				return false
			}
		}
	}
	return true
}

func containsSVC(scopeName string) bool {
	return strings.Contains(strings.ToLower(scopeName), "svc")
}

// versionAtLeast compares a dotted version (an optional leading "v"; missing parts count as 0)
// with major.minor.patch. A version that is not numbers does not qualify.
func versionAtLeast(v string, major, minor, patch int) bool {
	v = strings.TrimPrefix(v, "v")
	if v == "" {
		return false
	}
	parts := strings.Split(v, ".")
	if len(parts) > 3 {
		parts = parts[:3]
	}
	have := [3]int{}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return false
		}
		have[i] = n
	}
	want := [3]int{major, minor, patch}
	for i := range have {
		if have[i] != want[i] {
			return have[i] > want[i]
		}
	}
	return true
}

// writeSettings are the write path's settings in force: changeable at run time.
type writeSettings struct {
	mu          sync.Mutex
	deployment  Deployment
	stagedDelay time.Duration // resolved: ≥ 0
}

func (ws *writeSettings) get() (Deployment, time.Duration) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.deployment, ws.stagedDelay
}

func (ws *writeSettings) set(d Deployment, delay time.Duration) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.deployment, ws.stagedDelay = d, resolveStagedDelay(delay)
}

// resolveStagedDelay: 0 is the default, a negative delay is none.
func resolveStagedDelay(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultStagedDelay
	case d < 0:
		return 0
	}
	return d
}

func checkDeployment(d Deployment) error {
	if d < SelfHosted || d > HostedOldOrg {
		return fmt.Errorf("platform: unknown deployment %d", int(d))
	}
	return nil
}

// Deployment is the platform setting in force.
func (p *Platform) Deployment() Deployment {
	d, _ := p.write.get()
	return d
}

// StagedDelay is how long dual-path data stays invisible now (0: visible at once).
func (p *Platform) StagedDelay() time.Duration {
	_, delay := p.write.get()
	return delay
}

// SetDeployment changes the platform setting for the requests that arrive from now on.
func (p *Platform) SetDeployment(d Deployment) error {
	if err := checkDeployment(d); err != nil {
		return err
	}
	p.write.mu.Lock()
	defer p.write.mu.Unlock()
	p.write.deployment = d
	return nil
}

// SetStagedDelay changes the staging delay for the requests that arrive from now on (0: the
// default, negative: none); data already stored keeps the time it becomes visible.
func (p *Platform) SetStagedDelay(d time.Duration) {
	p.write.mu.Lock()
	defer p.write.mu.Unlock()
	p.write.stagedDelay = resolveStagedDelay(d)
}

// headerValue is platformHeader's value.
func headerValue(h http.Header, name string) string {
	v, _ := platformHeader(h, name)
	return v
}
