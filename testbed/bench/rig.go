// Package bench runs collector builds against the local svc platform under the load generator's
// workload and accounts for every span and score: the side-by-side load runs of `make bench`
// (Run) and the fault tests of testbed/e2e share it (Rig, Reckon).
package bench

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/loadgen"
	"github.com/svc/svc-collector/testbed/platform"
)

// Keys of the local platform in load runs and fault tests.
const (
	PublicKey = "pk-lt-testbed"
	SecretKey = "sk-lt-testbed"
)

// Delivery says what a build sends on to the platform.
type Delivery int

const (
	// GenAISpansAndScores: the GenAI spans, and a score per evaluation event (svc-otelcol).
	GenAISpansAndScores Delivery = iota
	// AllSpans: every span, no scores (a forwarding collector).
	AllSpans
	// GenAISpans: the GenAI spans, no scores (the OTTL peer).
	GenAISpans
)

// Build is a collector under test: a binary and its configuration.
type Build struct {
	// Name is the short name in reports (A, B, C); Title says what the build is.
	Name, Title string
	Binary      string
	Args        []string // before the --config flags
	Configs     []string
	Sets        []string
	Env         []string
	Delivers    Delivery
	// Extensions are the build's service::extensions, for adding the pprof extension to profile
	// it (empty: the build cannot be profiled, its binary has no pprof extension).
	Extensions []string
}

// PeerDir is testbed/peer: the peer's ocb manifest and the configs of builds B and C.
func PeerDir() string { return filepath.Join(collector.RepoRoot(), "testbed", "peer") }

// DefaultPeerBinary is where the peer's ocb manifest writes its binary.
func DefaultPeerBinary() string {
	return filepath.Join(collector.RepoRoot(), "build", "peer", "peer-otelcol")
}

// Gateway is build A: svc-otelcol with the default gateway pipeline of distribution/config.yaml.
func Gateway(svcOtelcol string) Build {
	return Build{
		Name: "A", Title: "svc-otelcol, default gateway pipeline",
		Binary: svcOtelcol, Configs: []string{collector.DefaultConfig()},
		Delivers: GenAISpansAndScores, Extensions: serviceExtensions(collector.DefaultConfig()),
	}
}

// serviceExtensions is the service::extensions list of the config at path (nil if it cannot be
// read), which profiling extends with pprof. Read, not written here: a copy drifted from the
// config (without svcsampling, which the span filter names, build A no longer started profiled).
func serviceExtensions(path string) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var cfg struct {
		Service struct {
			Extensions []string `yaml:"extensions"`
		} `yaml:"service"`
	}
	if yaml.Unmarshal(raw, &cfg) != nil {
		return nil
	}
	return cfg.Service.Extensions
}

// GatewayMemoryQueue is build M: build A with nothing in svc_file_storage (the svc exporter's queue
// and the span filter's held spans in memory), the configuration before issue 17; A/M is the
// cost of persistence.
func GatewayMemoryQueue(svcOtelcol string) Build {
	b := Gateway(svcOtelcol)
	b.Name, b.Title = "M", "svc-otelcol, default gateway pipeline, nothing on disk"
	b.Sets = []string{"exporters::svc::sending_queue::storage=null", "processors::svcspanfilter::storage=null"}
	return b
}

// Forwarder is build B, the floor: svc-otelcol's own otlp receiver and otlphttp exporter with
// nothing in between but the memory limiter (testbed/peer/forward-config.yaml).
func Forwarder(svcOtelcol string) Build {
	return Build{
		Name: "B", Title: "forwarding only: otlp → otlphttp (gzip), svc-otelcol binary",
		Binary: svcOtelcol, Configs: []string{filepath.Join(PeerDir(), "forward-config.yaml")},
		Delivers: AllSpans, Extensions: []string{"health_check"},
	}
}

// ForwarderBestSpeed is build B1: build B with otlphttp's gzip at level 1 (best speed), the level
// svc-otelcol's exporter compresses span batches at by default; B compresses at confighttp's
// default level. A/B and A/B1 are the two readings of the floor.
func ForwarderBestSpeed(svcOtelcol string) Build {
	b := Forwarder(svcOtelcol)
	b.Name, b.Title = "B1", "forwarding only, gzip level 1 (best speed): B with the gzip level of A"
	b.Sets = []string{"exporters::otlphttp::compression_params::level=1"}
	return b
}

// LambdaGate is the collector feature gate the peer's OTTL needs (Any, Filter, MapEach).
const LambdaGate = "ottl.functions.enableLambda"

// Peer is build C: contrib's filter, redaction and transform processors with OTTL, the nearest
// equivalent of the gateway pipeline (testbed/peer/peer-config.yaml), run with the LambdaGate
// feature gate its OTTL needs.
func Peer(binary string) Build {
	return Build{
		Name: "C", Title: "contrib OTTL peer: filter + redaction + transform",
		Binary: binary, Args: []string{"--feature-gates=" + LambdaGate},
		Configs:  []string{filepath.Join(PeerDir(), "peer-config.yaml")},
		Delivers: GenAISpans,
	}
}

// TargetedPeer is build C2, the strongest pipeline a user would write from contrib: the same
// binary, filter and metadata encoding as C, masking with the transform processor on the content
// attributes of each instrumentation only (testbed/peer/peer-c2-config.yaml).
func TargetedPeer(binary string) Build {
	return Build{
		Name: "C2", Title: "contrib OTTL peer: filter + transform, masking only the content attributes",
		Binary: binary, Args: []string{"--feature-gates=" + LambdaGate},
		Configs:  []string{filepath.Join(PeerDir(), "peer-c2-config.yaml")},
		Delivers: GenAISpans,
	}
}

// RigOptions adjust a rig.
type RigOptions struct {
	// StatsOnly keeps only ids and counts at the platform (load runs).
	StatsOnly bool
	// Configs and Sets are added after the build's own (a test's overrides).
	Configs, Sets []string
	// StartTimeout bounds the collector's start; default 60s.
	StartTimeout time.Duration
	// StorageDir is the collector's SVC_STORAGE_DIR; empty: a temporary directory of the rig's,
	// kept across restarts (StartCollector after Kill) and removed by Close.
	StorageDir string
}

// Rig is a local platform and a collector build in front of it.
type Rig struct {
	Build     Build
	Platform  *platform.Platform
	Collector *collector.Process
	// StorageDir is where every start of the collector keeps its svc_file_storage.
	StorageDir string
	opts       RigOptions
	ownDir     bool
}

// StartRig starts a platform and the build's collector pointed at it.
func StartRig(ctx context.Context, b Build, opts RigOptions) (*Rig, error) {
	p, err := platform.Start(platform.Options{PublicKey: PublicKey, SecretKey: SecretKey, StatsOnly: opts.StatsOnly})
	if err != nil {
		return nil, err
	}
	r := &Rig{Build: b, Platform: p, opts: opts, StorageDir: opts.StorageDir}
	if r.StorageDir == "" {
		if r.StorageDir, err = os.MkdirTemp("", "svc-otelcol-rig-"); err != nil {
			_ = p.Close()
			return nil, err
		}
		r.ownDir = true
	}
	if err := r.StartCollector(ctx); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// StartCollector starts the build's collector (again, after Kill or StopCollector).
func (r *Rig) StartCollector(ctx context.Context) error {
	if r.Collector != nil {
		select {
		case <-r.Collector.Exited():
		default:
			return errors.New("bench: the collector is still running")
		}
	}
	b := r.Build
	c, err := collector.Start(ctx, collector.Options{
		Binary:  b.Binary,
		Args:    b.Args,
		Configs: append(append([]string{}, b.Configs...), r.opts.Configs...),
		Sets:    append(append([]string{}, b.Sets...), r.opts.Sets...),
		Env: append([]string{
			"SVC_ENDPOINT=" + r.Platform.URL(),
			"SVC_PUBLIC_KEY=" + PublicKey,
			"SVC_SECRET_KEY=" + SecretKey,
			"SVC_BASIC_AUTH=" + base64.StdEncoding.EncodeToString([]byte(PublicKey+":"+SecretKey)),
		}, b.Env...),
		StartTimeout: r.opts.StartTimeout,
		StorageDir:   r.StorageDir,
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", b.Name, err)
	}
	r.Collector = c
	return nil
}

// ProfileSets are the --set overrides that add the pprof extension on a free loopback port to the
// build; ok is false when the build cannot be profiled.
func ProfileSets(b Build) (sets []string, endpoint string, ok bool, err error) {
	if len(b.Extensions) == 0 {
		return nil, "", false, nil
	}
	ports, err := collector.FreePorts(1)
	if err != nil {
		return nil, "", false, err
	}
	endpoint = fmt.Sprintf("127.0.0.1:%d", ports[0])
	return []string{
		"extensions::pprof::endpoint=" + endpoint,
		"service::extensions=[" + strings.Join(append(append([]string{}, b.Extensions...), "pprof"), ",") + "]",
	}, endpoint, true, nil
}

// Sender sends to the collector's OTLP receiver over the protocol (loadgen.ProtocolHTTP or
// loadgen.ProtocolGRPC).
func (r *Rig) Sender(protocol string) (loadgen.Sender, error) {
	endpoint := r.Collector.OTLPHTTPEndpoint
	if protocol == loadgen.ProtocolGRPC {
		endpoint = r.Collector.OTLPGRPCEndpoint
	}
	return loadgen.NewSender(loadgen.SenderOptions{Protocol: protocol, Endpoint: endpoint})
}

// Usage reads the collector's CPU time and memory from /proc.
func (r *Rig) Usage() (Usage, error) { return ReadUsage(r.Collector.PID()) }

// Close stops the collector (SIGTERM: it drains its queues; SIGKILL after 30s) and the platform.
func (r *Rig) Close() error {
	var err error
	if r.Collector != nil {
		err = r.Collector.Stop()
	}
	if r.ownDir {
		err = errors.Join(err, os.RemoveAll(r.StorageDir))
	}
	return errors.Join(err, r.Platform.Close())
}

// Usage is what a process has used so far.
type Usage struct {
	// CPU is user plus system time.
	CPU time.Duration
	// PeakRSS is the high-water mark of the resident set (VmHWM); RSS the current one.
	PeakRSS, RSS int64
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux ABI.
const clockTicks = 100

// ReadUsage reads /proc/<pid>/stat (utime, stime) and /proc/<pid>/status (VmHWM, VmRSS).
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The command name, field 2, is in parentheses and may hold spaces: count fields after it.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64) // field 14 of the whole line
	stime, err2 := strconv.ParseInt(fields[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmHWM":
			u.PeakRSS = kb << 10
		case "VmRSS":
			u.RSS = kb << 10
		}
	}
	return u, nil
}
