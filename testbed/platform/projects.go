package platform

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ProjectKeys is the API key pair of one project.
type ProjectKeys struct {
	PublicKey string
	SecretKey string
}

// ProjectsOptions configure a platform that knows several projects.
type ProjectsOptions struct {
	// Addr is the loopback listen address of the front. Default DefaultAddr.
	Addr string
	// Projects are the projects' key pairs; at least one, public keys distinct.
	Projects []ProjectKeys
	// Version, Logger, StatsOnly, Deployment and StagedDelay apply to every project (see
	// Options); each project's can be changed on its own later.
	Version     string
	Logger      *slog.Logger
	StatsOnly   bool
	Deployment  Deployment
	StagedDelay time.Duration
}

// Projects is a platform that knows several projects, as the real one does: each key pair is a
// project with its own stored data, request log, faults and read APIs, and a request goes to the
// project its credentials name. Each project is a full Platform (reachable through Project for
// inspection and faults); the front in front of them routes by the public key of the Basic
// credentials, and the project checks the secret. A public key no project has gets 401, and a
// revoked project's keys get the status Revoke set, on every endpoint but health.
type Projects struct {
	opts  ProjectsOptions
	log   *slog.Logger
	ln    net.Listener
	srv   *http.Server
	url   string
	byKey map[string]*Platform
	first *Platform

	mu      sync.Mutex
	revoked map[string]int
	refused map[string]int

	serveDone chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// StartProjects starts one platform per project and the front that routes to them.
func StartProjects(opts ProjectsOptions) (*Projects, error) {
	if len(opts.Projects) == 0 {
		return nil, errors.New("platform: at least one project is required")
	}
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if err := checkLoopback(opts.Addr); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ps := &Projects{opts: opts, log: opts.Logger, byKey: map[string]*Platform{}, revoked: map[string]int{}, refused: map[string]int{}, serveDone: make(chan struct{})}
	for _, keys := range opts.Projects {
		if _, dup := ps.byKey[keys.PublicKey]; dup {
			ps.closeProjects()
			return nil, fmt.Errorf("platform: public key %q belongs to two projects", keys.PublicKey)
		}
		p, err := Start(Options{PublicKey: keys.PublicKey, SecretKey: keys.SecretKey, Version: opts.Version,
			Logger: opts.Logger.With("project", keys.PublicKey), StatsOnly: opts.StatsOnly,
			Deployment: opts.Deployment, StagedDelay: opts.StagedDelay})
		if err != nil {
			ps.closeProjects()
			return nil, err
		}
		ps.byKey[keys.PublicKey] = p
		if ps.first == nil {
			ps.first = p
		}
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		ps.closeProjects()
		return nil, fmt.Errorf("platform: listen on %s: %w", opts.Addr, err)
	}
	ps.ln, ps.url = ln, "http://"+ln.Addr().String()
	ps.srv = &http.Server{Handler: ps, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(ps.log.Handler(), slog.LevelWarn)}
	go func() {
		defer close(ps.serveDone)
		if err := ps.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ps.log.Error("platform front stopped", "error", err)
		}
	}()
	ps.log.Info("svc platform with projects listening", "url", ps.url, "projects", len(opts.Projects))
	return ps, nil
}

// URL is the base URL every project is reached at (the exporter's endpoint).
func (ps *Projects) URL() string { return ps.url }

// Project is the platform of the project with public key pk (nil when there is none): its
// stored data, statistics and faults.
func (ps *Projects) Project(pk string) *Platform { return ps.byKey[pk] }

// Revoke makes the platform refuse pk's credentials with status (401 or 403) from now on, as
// when a project's keys are revoked. Restore undoes it.
func (ps *Projects) Revoke(pk string, status int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.revoked[pk] = status
}

// Restore accepts pk's credentials again.
func (ps *Projects) Restore(pk string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.revoked, pk)
}

// Refused is how many requests naming pk the front refused (unknown or revoked key).
func (ps *Projects) Refused(pk string) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.refused[pk]
}

// ServeHTTP routes a request to the project its credentials name. Health needs no credentials and
// is answered by the first project; control requests go to each project's own URL.
func (ps *Projects) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == PathHealth {
		ps.first.ServeHTTP(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		writeError(w, http.StatusNotFound, "the control API of a project is at its own URL (Projects.Project(pk).URL())")
		return
	}
	pk, ok := basicPublicKey(r.Header.Get("Authorization"))
	p := ps.byKey[pk]
	ps.mu.Lock()
	status, revoked := ps.revoked[pk]
	if ok && (p == nil || revoked) {
		ps.refused[pk]++
	}
	ps.mu.Unlock()
	switch {
	case !ok:
		writeError(w, http.StatusUnauthorized, "missing or malformed Authorization header; use Basic auth with the public and secret key")
	case p == nil:
		writeError(w, http.StatusUnauthorized, "invalid public or secret key")
	case revoked:
		writeError(w, status, "the API keys of this project were revoked")
	default:
		p.ServeHTTP(w, r)
		return
	}
	ps.log.Info("request refused by the front", "path", r.URL.Path, "public_key", pk)
}

// basicPublicKey is the public key of `Basic base64(public_key:secret_key)`; the secret is checked
// by the project.
func basicPublicKey(header string) (string, bool) {
	scheme, encoded, _ := strings.Cut(strings.TrimSpace(header), " ")
	if !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return "", false
	}
	pk, _, ok := strings.Cut(string(decoded), ":")
	return pk, ok && pk != ""
}

// Shutdown stops the front, then every project.
func (ps *Projects) Shutdown(ctx context.Context) error {
	ps.closeOnce.Do(func() {
		err := ps.srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(err, ps.srv.Close())
		}
		<-ps.serveDone
		for _, p := range ps.byKey {
			err = errors.Join(err, p.Shutdown(ctx))
		}
		ps.closeErr = err
	})
	return ps.closeErr
}

// Close is Shutdown with a five-second grace period. Calling it again is harmless.
func (ps *Projects) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return ps.Shutdown(ctx)
}

func (ps *Projects) closeProjects() {
	for _, p := range ps.byKey {
		_ = p.Close()
	}
}
