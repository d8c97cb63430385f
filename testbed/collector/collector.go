// Package collector runs a built collector binary (bin/svc-otelcol, or any ocb build) as a child
// process on loopback ports, for the demo, the end-to-end tests and the load runs.
package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say which binary to run with which configuration.
type Options struct {
	// Binary is the collector executable.
	Binary string
	// Args come before the --config flags, e.g. "--feature-gates=...".
	Args []string
	// Configs are --config arguments (file paths, or yaml:/env: URIs), applied in order.
	Configs []string
	// Sets are --set overrides such as "exporters::svc::compression=none".
	Sets []string
	// Env is added to the child's environment (KEY=VALUE). The child gets the loopback
	// endpoints below as SVC_OTLP_GRPC_ENDPOINT, SVC_OTLP_HTTP_ENDPOINT, SVC_HEALTH_ENDPOINT,
	// SVC_METRICS_HOST and SVC_METRICS_PORT, which distribution/config.yaml reads.
	Env []string
	// StartTimeout bounds the wait for the health check; default 60s.
	StartTimeout time.Duration
	// OTLPGRPCEndpoint and OTLPHTTPEndpoint, when set, are the loopback addresses of the OTLP
	// receivers instead of free ports: a collector restarted after Kill keeps the addresses its
	// clients know (the gateways behind a router with a static list of them, a router its
	// applications send to).
	OTLPGRPCEndpoint, OTLPHTTPEndpoint string
	// StorageDir is given to the child as SVC_STORAGE_DIR, the directory of distribution/config.yaml's
	// svc_file_storage (exporter queue, held spans). Empty: a new temporary directory, removed when
	// the process ends, so that runs never share or inherit stored data. Set it to restart a
	// collector on the storage a killed one left.
	StorageDir string
}

// Process is a running collector.
type Process struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
	err  error // exit error, valid after done is closed

	// Loopback endpoints of its OTLP receivers and health check.
	OTLPGRPCEndpoint string
	OTLPHTTPEndpoint string
	HealthEndpoint   string
	// MetricsEndpoint serves the collector's own metrics (Prometheus text at /metrics).
	MetricsEndpoint string
	// StorageDir is the child's SVC_STORAGE_DIR (see Options.StorageDir).
	StorageDir string
}

// DefaultConfig is the path of distribution/config.yaml, found from this source file so that
// tests and commands work from any directory of the repository.
func DefaultConfig() string {
	return filepath.Join(RepoRoot(), "distribution", "config.yaml")
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "."
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Start starts the binary and waits until its health check answers 200. When it does not,
// the process is stopped and the error carries the collector's own output. A port FreePorts
// picked can be taken by another process before the collector binds it: that start is tried
// again on new ports (twice at most), never one whose busy address the caller chose.
func Start(ctx context.Context, opts Options) (*Process, error) {
	for attempt := 1; ; attempt++ {
		p, picked, err := start(ctx, opts)
		if err == nil || attempt == 3 || !lostPortRace(err, picked) {
			return p, err
		}
	}
}

// lostPortRace reports whether err is a bind failure on one of the addresses Start picked.
func lostPortRace(err error, picked []string) bool {
	for _, addr := range picked {
		if strings.Contains(err.Error(), addr+": bind: address already in use") {
			return true
		}
	}
	return false
}

func start(ctx context.Context, opts Options) (*Process, []string, error) {
	ports, err := FreePorts(4)
	if err != nil {
		return nil, nil, err
	}
	p := &Process{
		logs:             &syncBuffer{},
		done:             make(chan struct{}),
		OTLPGRPCEndpoint: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		OTLPHTTPEndpoint: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		HealthEndpoint:   fmt.Sprintf("127.0.0.1:%d", ports[2]),
		MetricsEndpoint:  fmt.Sprintf("127.0.0.1:%d", ports[3]),
	}
	picked := []string{p.HealthEndpoint, p.MetricsEndpoint}
	if opts.OTLPGRPCEndpoint != "" {
		p.OTLPGRPCEndpoint = opts.OTLPGRPCEndpoint
	} else {
		picked = append(picked, p.OTLPGRPCEndpoint)
	}
	if opts.OTLPHTTPEndpoint != "" {
		p.OTLPHTTPEndpoint = opts.OTLPHTTPEndpoint
	} else {
		picked = append(picked, p.OTLPHTTPEndpoint)
	}
	args := append(make([]string, 0, len(opts.Args)+2*len(opts.Configs)+2*len(opts.Sets)), opts.Args...)
	for _, c := range opts.Configs {
		args = append(args, "--config", c)
	}
	for _, s := range opts.Sets {
		args = append(args, "--set", s)
	}
	p.cmd = exec.Command(opts.Binary, args...)
	p.cmd.Env = append(os.Environ(),
		"SVC_OTLP_GRPC_ENDPOINT="+p.OTLPGRPCEndpoint,
		"SVC_OTLP_HTTP_ENDPOINT="+p.OTLPHTTPEndpoint,
		"SVC_HEALTH_ENDPOINT="+p.HealthEndpoint,
		"SVC_METRICS_HOST=127.0.0.1",
		fmt.Sprintf("SVC_METRICS_PORT=%d", ports[3]),
	)
	storageDir, ownDir := opts.StorageDir, false
	if storageDir == "" {
		if storageDir, err = os.MkdirTemp("", "svc-otelcol-storage-"); err != nil {
			return nil, nil, fmt.Errorf("storage directory: %w", err)
		}
		ownDir = true
	}
	p.StorageDir = storageDir
	p.cmd.Env = append(p.cmd.Env, "SVC_STORAGE_DIR="+storageDir)
	p.cmd.Env = append(p.cmd.Env, opts.Env...)
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		if ownDir {
			_ = os.RemoveAll(storageDir)
		}
		return nil, nil, fmt.Errorf("start %s: %w", opts.Binary, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		if ownDir {
			_ = os.RemoveAll(storageDir)
		}
		close(p.done)
	}()

	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	if err := p.waitHealthy(ctx, timeout); err != nil {
		_ = p.Stop()
		return nil, picked, fmt.Errorf("%w\ncollector output:\n%s", err, p.Logs())
	}
	return p, picked, nil
}

func (p *Process) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + p.HealthEndpoint + "/"
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return fmt.Errorf("collector exited before it became healthy: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("collector not healthy after %s", timeout)
		case <-tick.C:
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
	}
}

// Stop asks the collector to shut down (SIGTERM, which drains its queues) and waits up to 30s,
// then kills it. It returns the exit error, if any, other than the signal itself.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("collector did not stop within 30s of SIGTERM; killed")
	}
	return p.exitErr()
}

// Kill ends the collector at once (SIGKILL), as a crash would.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.done }

func (p *Process) exitErr() error {
	var exit *exec.ExitError
	if errors.As(p.err, &exit) && exit.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
		return nil
	}
	return p.err
}

// Logs is everything the collector has written so far.
func (p *Process) Logs() string { return p.logs.String() }

// PID is the collector's process id (for resource measurements).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Run runs the binary to its end with the given arguments and environment, for commands that
// are expected to stop by themselves (a config that fails to load, `components`, `validate`).
// Unless env sets SVC_STORAGE_DIR, the run gets a temporary storage directory of its own.
func Run(ctx context.Context, binary string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = os.Environ()
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "SVC_STORAGE_DIR=") }) {
		dir, err := os.MkdirTemp("", "svc-otelcol-storage-")
		if err != nil {
			return "", fmt.Errorf("storage directory: %w", err)
		}
		defer os.RemoveAll(dir)
		cmd.Env = append(cmd.Env, "SVC_STORAGE_DIR="+dir)
	}
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// FreePorts reserves n distinct loopback TCP ports and releases them for the caller to use.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// syncBuffer is a bytes.Buffer that the child's stdout and stderr goroutines and readers share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CountLines counts the log lines that contain every one of the given substrings.
func (p *Process) CountLines(substrings ...string) int {
	n := 0
	for _, line := range strings.Split(p.Logs(), "\n") {
		match := true
		for _, s := range substrings {
			if !strings.Contains(line, s) {
				match = false
				break
			}
		}
		if match && line != "" {
			n++
		}
	}
	return n
}
