// Package platform is a local, strict stand-in for the svc platform (docs/architecture.md §8): the HTTP
// server that the demo and every end-to-end, fault and load test send to. It rejects what the
// real platform rejects (auth, content types, encodings, malformed payloads, the scores batch
// rules of docs/contract.md §11), stores what it accepts the way the platform does (spans become
// observations, metadata of the new encoding is decoded to typed values, ids upsert), serves it
// back through the read APIs docs/contract.md names, and lets tests inject faults at run time.
//
// See README.md beside this file for the endpoints and the control API.
package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultVersion is the server version the health endpoint reports unless told otherwise: the
// minimum version the new SDK majors need (docs/contract.md §1).
const DefaultVersion = "4.59.0"

// DefaultAddr listens on a free loopback port.
const DefaultAddr = "127.0.0.1:0"

// DefaultMaxBodyBytes bounds every request body, as sent and after decompression, so that a
// runaway client or a gzip bomb cannot exhaust the test machine. A bigger body gets 413.
const DefaultMaxBodyBytes = 64 << 20

// Options configure a platform. PublicKey and SecretKey are required.
type Options struct {
	// Addr is the listen address; it must be a loopback address. Default DefaultAddr.
	Addr string
	// PublicKey and SecretKey are the only credentials the platform accepts.
	PublicKey string
	SecretKey string
	// Version is what GET /api/public/health reports. Default DefaultVersion.
	Version string
	// Logger receives one line per request (never credentials). Default: discard.
	Logger *slog.Logger
	// MaxBodyBytes bounds request bodies as sent and after decompression. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// StatsOnly keeps counts, ids and delivery counts but not the content of spans and scores:
	// for load tests that push many spans and only check what arrived and how often.
	StatsOnly bool
	// Deployment is the platform setting that decides, with each request's headers and scopes,
	// whether its spans are written directly or staged (README.md, "Write path"). Default
	// SelfHosted: everything direct.
	Deployment Deployment
	// StagedDelay is how long staged (dual-path) spans stay invisible to the observations API.
	// 0: DefaultStagedDelay; NoStagedDelay (any negative value): visible at once.
	StagedDelay time.Duration
}

// Platform is a running local svc platform. All methods are safe for concurrent use.
type Platform struct {
	opts   Options
	log    *slog.Logger
	ln     net.Listener
	srv    *http.Server
	url    string
	routes map[string]route

	store  *store
	faults *faults
	write  writeSettings // deployment and staging delay in force

	serveDone chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Start validates opts, listens on opts.Addr and serves until Close.
func Start(opts Options) (*Platform, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("platform: listen on %s: %w", opts.Addr, err)
	}
	p := &Platform{
		opts:      opts,
		log:       opts.Logger,
		ln:        ln,
		url:       "http://" + ln.Addr().String(),
		store:     newStore(opts.StatsOnly),
		faults:    newFaults(opts.Version),
		serveDone: make(chan struct{}),
	}
	p.write.set(opts.Deployment, opts.StagedDelay)
	p.routes = p.newRoutes()
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(p.serveDone)
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("platform server stopped", "error", err)
		}
	}()
	p.log.Info("svc platform listening", "url", p.url, "version", opts.Version)
	return p, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if err := checkLoopback(o.Addr); err != nil {
		return o, err
	}
	if o.PublicKey == "" || o.SecretKey == "" {
		return o, errors.New("platform: PublicKey and SecretKey are required")
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.MaxBodyBytes < 0 {
		return o, fmt.Errorf("platform: MaxBodyBytes %d is negative", o.MaxBodyBytes)
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if err := checkDeployment(o.Deployment); err != nil {
		return o, err
	}
	return o, nil
}

// checkLoopback keeps the testbed off every interface but loopback: it accepts any request
// that carries the keys, and its control API needs none.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("platform: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("platform: listen address %q is not a loopback address (use 127.0.0.1)", addr)
}

// URL is the base URL of the platform, e.g. http://127.0.0.1:41234: what the exporter's
// endpoint is set to.
func (p *Platform) URL() string { return p.url }

// Addr is the host:port the platform listens on.
func (p *Platform) Addr() string { return p.ln.Addr().String() }

// Shutdown stops accepting requests and waits for those in flight until ctx ends; then it
// closes the remaining connections.
func (p *Platform) Shutdown(ctx context.Context) error {
	p.closeOnce.Do(func() {
		err := p.srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(err, p.srv.Close())
		}
		<-p.serveDone
		p.closeErr = err
		p.store.wake()
		p.log.Info("svc platform stopped", "url", p.url)
	})
	return p.closeErr
}

// Close is Shutdown with a five-second grace period. Calling it again is harmless.
func (p *Platform) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Shutdown(ctx)
}

// Reset forgets every stored observation and score, the statistics and the request log,
// clears all faults and restores the configured version, deployment and staging delay: the
// state of a fresh platform.
func (p *Platform) Reset() {
	p.faults.reset(p.opts.Version)
	p.write.set(p.opts.Deployment, p.opts.StagedDelay)
	p.store.reset()
}
