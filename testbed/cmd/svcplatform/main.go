// Command svcplatform runs the local svc platform of the testbed (testbed/platform) until
// SIGINT or SIGTERM. It prints its base URL on the first line of standard output; logs go to
// standard error.
//
//	svcplatform [-listen 127.0.0.1:3000] [-public-key PK] [-secret-key SK] [-version 4.59.0] [-v] [-stats-only]
//	            [-deployment self-hosted|hosted-new-org|hosted-old-org] [-staged-delay 2s]
//
// -deployment and -staged-delay model when users see what arrives (testbed/platform/README.md,
// "Write path"): staged spans stay hidden from the observations API for the staging delay.
//
// The keys default to SVC_PUBLIC_KEY and SVC_SECRET_KEY; prefer the environment for the secret,
// command lines are visible to other users of the machine. SVC_PROJECTS="pk-a:sk-a,pk-b:sk-b"
// starts a platform with several projects instead (platform.StartProjects), each with its own
// data: what a multi-tenant gateway (distribution/examples/multi-tenant.yaml) sends to.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/svc/svc-collector/testbed/platform"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "svcplatform:", err)
		}
		os.Exit(2)
	}
}

// config is what the flags and the environment say.
type config struct {
	opts     platform.Options
	projects []platform.ProjectKeys
	verbose  bool
}

// parseProjects reads SVC_PROJECTS: public:secret pairs separated by commas. Errors name the
// position, never a key.
func parseProjects(value string) ([]platform.ProjectKeys, error) {
	var out []platform.ProjectKeys
	for i, pair := range strings.Split(value, ",") {
		pk, sk, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok || pk == "" || sk == "" {
			return nil, fmt.Errorf("SVC_PROJECTS entry %d is not public_key:secret_key", i+1)
		}
		out = append(out, platform.ProjectKeys{PublicKey: pk, SecretKey: sk})
	}
	return out, nil
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("svcplatform", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.opts.Addr, "listen", "127.0.0.1:3000", "listen address (loopback only)")
	fs.StringVar(&c.opts.PublicKey, "public-key", getenv("SVC_PUBLIC_KEY"), "the public key clients must send (default $SVC_PUBLIC_KEY)")
	fs.StringVar(&c.opts.SecretKey, "secret-key", "", "the secret key clients must send (default $SVC_SECRET_KEY)")
	fs.StringVar(&c.opts.Version, "version", platform.DefaultVersion, "server version reported by GET /api/public/health")
	fs.BoolVar(&c.opts.StatsOnly, "stats-only", false, "count spans and scores without storing their content (load runs)")
	fs.BoolVar(&c.verbose, "v", false, "log every request")
	fs.TextVar(&c.opts.Deployment, "deployment", platform.SelfHosted,
		"platform setting of the write path: self-hosted (all direct), hosted-new-org, hosted-old-org")
	fs.DurationVar(&c.opts.StagedDelay, "staged-delay", platform.DefaultStagedDelay,
		"how long staged (dual-path) spans stay hidden from the observations API; 0 = the default, negative = none")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// Read after parsing so that the secret from the environment never shows as a flag default in -h.
	if c.opts.SecretKey == "" {
		c.opts.SecretKey = getenv("SVC_SECRET_KEY")
	}
	if projects := getenv("SVC_PROJECTS"); projects != "" {
		var err error
		c.projects, err = parseProjects(projects)
		return c, err
	}
	if c.opts.PublicKey == "" || c.opts.SecretKey == "" {
		return c, errors.New("set the keys with -public-key/-secret-key or SVC_PUBLIC_KEY/SVC_SECRET_KEY")
	}
	return c, nil
}

// run serves until ctx ends, then stops gracefully.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if c.verbose {
		level = slog.LevelDebug
	}
	c.opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if len(c.projects) > 0 {
		return runProjects(ctx, c, stdout)
	}
	p, err := platform.Start(c.opts)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, p.URL())
	c.opts.Logger.Info("write path", "deployment", p.Deployment(), "staged_delay", p.StagedDelay())
	<-ctx.Done()

	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = p.Shutdown(shutdownCtx)
	st := p.Stats()
	c.opts.Logger.Info("final stats", "spans", st.SpansReceived, "unique_spans", st.UniqueSpans,
		"scores", st.ScoresReceived, "unique_scores", st.UniqueScores, "scores_rejected", st.ScoresRejected)
	return err
}

// runProjects serves a platform with several projects until ctx ends.
func runProjects(ctx context.Context, c config, stdout io.Writer) error {
	ps, err := platform.StartProjects(platform.ProjectsOptions{Addr: c.opts.Addr, Projects: c.projects,
		Version: c.opts.Version, Logger: c.opts.Logger, StatsOnly: c.opts.StatsOnly,
		Deployment: c.opts.Deployment, StagedDelay: c.opts.StagedDelay})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, ps.URL())
	<-ctx.Done()
	for _, k := range c.projects {
		st := ps.Project(k.PublicKey).Stats()
		c.opts.Logger.Info("final stats", "project", k.PublicKey, "unique_spans", st.UniqueSpans, "unique_scores", st.UniqueScores)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return ps.Shutdown(shutdownCtx)
}
