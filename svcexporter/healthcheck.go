package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	version "github.com/hashicorp/go-version"
	"go.uber.org/zap"
)

// healthCheckTimeout bounds the start-up version check, so that an unresponsive platform delays
// the collector's start by seconds, not by the client's full request timeout.
const healthCheckTimeout = 10 * time.Second

var minServerVersion = version.Must(version.NewVersion(MinServerVersion))

// versionChecks shares the start-up version check between the exporters of one process that
// reach the same platform with the same credentials and mode: the collector builds a traces and a
// logs exporter from one `svc` config, and the platform is asked once and the outcome logged once.
// An entry lives while an exporter holds it, so a collector that reloads its config checks again.
var versionChecks = struct {
	sync.Mutex
	byKey map[versionCheckKey]*sharedVersionCheck
}{byKey: map[versionCheckKey]*sharedVersionCheck{}}

type versionCheckKey struct {
	healthURL, authorization string
	mode                     ServerVersionCheck
}

// sharedVersionCheck is the one check of a key and its outcome (nil, or the start error).
type sharedVersionCheck struct {
	once sync.Once
	err  error
	refs int
}

// acquireVersionCheck returns the check of key and the function that releases it.
func acquireVersionCheck(key versionCheckKey) (*sharedVersionCheck, func()) {
	versionChecks.Lock()
	defer versionChecks.Unlock()
	check, ok := versionChecks.byKey[key]
	if !ok {
		check = &sharedVersionCheck{}
		versionChecks.byKey[key] = check
	}
	check.refs++
	return check, func() {
		versionChecks.Lock()
		defer versionChecks.Unlock()
		if check.refs--; check.refs == 0 {
			delete(versionChecks.byKey, key)
		}
	}
}

// run runs check the first time only and returns its outcome every time.
func (c *sharedVersionCheck) run(check func() error) error {
	c.once.Do(func() { c.err = check() })
	return c.err
}

// healthResponse is the body of GET /api/public/health: {"status":"OK","version":"4.59.0"}.
type healthResponse struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// checkServerVersion compares the platform's version with MinServerVersion at start.
//
// An older version is a start failure under `enforce` and a warning under `warn`. When the
// version cannot be read (platform unreachable, non-200 answer, unreadable body) the exporter
// warns and starts in both modes: a platform outage while the gateway starts must not stop the
// gateway, whose queue and retries are there to carry the data over the outage.
func (e *svcExporter) checkServerVersion(ctx context.Context) error {
	if e.cfg.ServerVersionCheck == VersionCheckOff {
		return nil
	}
	found, err := e.fetchServerVersion(ctx)
	if err != nil {
		e.logger.Warn("Could not check the svc platform version at start; starting anyway",
			zap.String("url", e.healthURL),
			zap.String("required_version", MinServerVersion),
			zap.Error(err))
		return nil
	}
	if !found.LessThan(minServerVersion) {
		e.logger.Debug("svc platform version checked", zap.String("version", found.Original()))
		return nil
	}
	if e.cfg.ServerVersionCheck == VersionCheckEnforce {
		return fmt.Errorf("svc platform at %s reports version %s, older than the minimum %s this exporter requires; upgrade the platform, or set server_version_check to warn or off",
			e.cfg.ClientConfig.Endpoint, found.Original(), MinServerVersion)
	}
	e.logger.Warn("svc platform is older than the minimum version this exporter requires; spans and scores may be refused or stored in the old shape",
		zap.String("endpoint", e.cfg.ClientConfig.Endpoint),
		zap.String("found_version", found.Original()),
		zap.String("required_version", MinServerVersion))
	return nil
}

func (e *svcExporter) fetchServerVersion(ctx context.Context) (*version.Version, error) {
	ctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
	defer cancel()
	req, err := e.newRequest(ctx, e.static, http.MethodGet, e.healthURL, "", "", nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.plainClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{code: resp.StatusCode, url: e.healthURL, message: e.serverMessage(e.static, resp.Header.Get("Content-Type"), body)}
	}
	var health healthResponse
	if err := json.Unmarshal(body, &health); err != nil {
		return nil, fmt.Errorf("health response is not the expected JSON: %w", err)
	}
	if health.Version == "" {
		return nil, errors.New(`health response has no "version"`)
	}
	v, err := version.NewVersion(health.Version)
	if err != nil {
		return nil, fmt.Errorf("health response has an unreadable version %q: %w", health.Version, err)
	}
	return v, nil
}
