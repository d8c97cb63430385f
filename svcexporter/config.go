package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/svc/svc-collector/pkg/writepath"
)

// ServerVersionCheck says what the exporter does at start when the platform is older than
// MinServerVersion.
type ServerVersionCheck string

const (
	// VersionCheckEnforce fails Start when the platform reports an older version.
	VersionCheckEnforce ServerVersionCheck = "enforce"
	// VersionCheckWarn logs a warning and starts anyway.
	VersionCheckWarn ServerVersionCheck = "warn"
	// VersionCheckOff sends no health request at all.
	VersionCheckOff ServerVersionCheck = "off"
)

// MinServerVersion is the oldest platform version the new SDK majors, and so this exporter,
// support (docs/contract.md §1).
const MinServerVersion = "4.59.0"

// WritePath says which span requests carry `x-svc-ingestion-version: 4`, the header that makes the
// platform write a request at once instead of staging it (docs/contract.md §17).
type WritePath string

const (
	// WritePathAuto: the requests whose every span a direct export would have had written at once
	// (current svc SDK majors, other instrumentations) carry it; older SDK majors' spans go in
	// requests of their own without it (pkg/writepath).
	WritePathAuto WritePath = "auto"
	// WritePathAlways: every span request carries it, older SDK majors' spans too.
	WritePathAlways WritePath = "always"
	// WritePathNever: no request carries it; the platform's own rules decide.
	WritePathNever WritePath = "never"
)

// Config is the configuration of the svc exporter.
type Config struct {
	// ClientConfig is the collector's standard HTTP client: endpoint (the platform base URL),
	// TLS, proxy, timeout (per HTTP request), extra headers, compression.
	ClientConfig confighttp.ClientConfig                                  `mapstructure:",squash"`
	QueueConfig  configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	RetryConfig  configretry.BackOffConfig                                `mapstructure:"retry_on_failure"`

	// PublicKey and SecretKey are the project's API key pair, sent as Basic auth.
	PublicKey string              `mapstructure:"public_key"`
	SecretKey configopaque.String `mapstructure:"secret_key"`

	// PassThrough: the gateway holds no keys; each push goes with the credentials of the request
	// its data came in with (client metadata `authorization`, docs/architecture.md §7).
	PassThrough bool `mapstructure:"pass_through"`

	// ServerVersionCheck: enforce (default), warn or off.
	ServerVersionCheck ServerVersionCheck `mapstructure:"server_version_check"`

	// WritePath: auto (default), always or never (see WritePath).
	WritePath WritePath `mapstructure:"write_path"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate checks the settings this exporter adds; the embedded sections validate themselves.
func (cfg *Config) Validate() error {
	var errs []error
	if err := validateEndpoint(cfg.ClientConfig.Endpoint); err != nil {
		errs = append(errs, err)
	}
	switch {
	case cfg.PassThrough:
		// A key pair beside pass_through would suggest a fallback that does not exist.
		if cfg.PublicKey != "" || cfg.SecretKey != "" {
			errs = append(errs, errors.New("pass_through sends each request's own credentials: public_key and secret_key must not be set"))
		}
		// Either would replace every team's credentials with one set: all data to one project.
		for name := range cfg.ClientConfig.Headers.Iter {
			if strings.EqualFold(name, "Authorization") || strings.EqualFold(name, "x-svc-public-key") {
				errs = append(errs, fmt.Errorf("pass_through sends each request's own credentials: headers must not set %s", name))
			}
		}
		if cfg.ClientConfig.Auth.HasValue() {
			errs = append(errs, errors.New("pass_through sends each request's own credentials: auth (a client authenticator) must not be set"))
		}
	default:
		if strings.TrimSpace(cfg.PublicKey) == "" {
			errs = append(errs, errors.New("public_key must be set (the project's public API key, pk-...), or pass_through: true"))
		}
		if strings.TrimSpace(string(cfg.SecretKey)) == "" {
			errs = append(errs, errors.New("secret_key must be set (the project's secret API key, sk-...), or pass_through: true"))
		}
	}
	switch cfg.ServerVersionCheck {
	case VersionCheckEnforce, VersionCheckWarn, VersionCheckOff:
	default:
		errs = append(errs, fmt.Errorf("server_version_check must be one of enforce, warn, off; got %q", string(cfg.ServerVersionCheck)))
	}
	switch cfg.WritePath {
	case WritePathAuto, WritePathAlways, WritePathNever:
	default:
		errs = append(errs, fmt.Errorf("write_path must be one of auto, always, never; got %q", string(cfg.WritePath)))
	}
	for name := range cfg.ClientConfig.Headers.Iter {
		if h, ok := pathHeader(name); ok {
			errs = append(errs, fmt.Errorf("headers must not set %s: a header set there replaces the exporter's own on every request, "+
				"so it would decide the platform's write path of every span; use write_path (auto, always, never) instead", h))
		}
	}
	if !supportedCompression(cfg.ClientConfig.Compression) {
		errs = append(errs, fmt.Errorf("compression must be gzip or none (the platform accepts no other); got %q", string(cfg.ClientConfig.Compression)))
	}
	if cfg.ClientConfig.Compression == "" {
		// Gzip unless the environment says none; confighttp checks the level only of a
		// compression set in the config.
		gz := configcompression.TypeGzip
		if err := gz.ValidateParams(cfg.ClientConfig.CompressionParams); err != nil {
			errs = append(errs, fmt.Errorf("compression_params: %w", err))
		}
	}
	return errors.Join(errs...)
}

// pathHeader reports whether a header name is one the platform chooses the write path by (read
// with `-` or `_`, in any case), and returns it as written.
func pathHeader(name string) (string, bool) {
	normal := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	switch normal {
	case writepath.HeaderIngestionVersion, writepath.HeaderSDKName, writepath.HeaderSDKVersion:
		return name, true
	}
	return "", false
}

func validateEndpoint(endpoint string) error {
	if endpoint == "" {
		return errors.New("endpoint must be set to the svc platform base URL, e.g. https://cloud.svc.example")
	}
	if hasUserinfo(endpoint) {
		// Checked first, and the endpoint never quoted: user:password@ would show a secret.
		return errors.New("endpoint must not carry credentials (user:password@); set public_key and secret_key instead")
	}
	u, err := url.Parse(endpoint)
	if !strings.Contains(endpoint, "://") {
		// host:port or a bare host name: the most common slip, told with its fix.
		return fmt.Errorf("endpoint must be an absolute http:// or https:// URL (the platform base URL); got %q, which has no scheme: write %q (or http:// for a platform without TLS)", endpoint, "https://"+endpoint)
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("endpoint must be an absolute http:// or https:// URL (the platform base URL); got %q", endpoint)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		// Not quoted: a query may carry a token.
		return fmt.Errorf("endpoint must be the platform base URL without query or fragment; got %q with one", u.Scheme+"://"+u.Host+u.Path)
	}
	return nil
}

// hasUserinfo reports an "@" in the endpoint's authority (between the scheme, if any, and the
// first "/", "?" or "#"), with or without a scheme.
func hasUserinfo(endpoint string) bool {
	authority := endpoint
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		authority = rest
	}
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	return strings.Contains(authority, "@")
}

// supportedCompression: the empty value means "not set in the config" and lets the environment
// decide (see resolveCompression).
func supportedCompression(c configcompression.Type) bool {
	switch c {
	case "", configcompression.TypeGzip, compressionNone:
		return true
	}
	return false
}

var _ confmap.Unmarshaler = (*Config)(nil)

// Unmarshal decodes the exporter's section. It first decodes the section into strictConfig to
// reject unknown keys: since confighttp.ClientConfig (squashed into Config) has an Unmarshal method
// of its own, the collector's decoder ignores every unknown key of a config that embeds it, so a
// misspelt `secret_kye` or `tls::insecure_skip_verfy` would otherwise pass unnoticed. The upstream
// issue, drafted: docs/upstream.md §2.
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if err := conf.Unmarshal(&strictConfig{}); err != nil {
		return err
	}
	return conf.Unmarshal(cfg)
}

// strictClientConfig has the fields of confighttp.ClientConfig but none of its methods, so that
// decoding into it checks every key, nested ones included.
type strictClientConfig confighttp.ClientConfig

// strictConfig is Config with ClientConfig replaced by strictClientConfig; a test keeps the two
// in step.
type strictConfig struct {
	ClientConfig       strictClientConfig                                       `mapstructure:",squash"`
	QueueConfig        configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	RetryConfig        configretry.BackOffConfig                                `mapstructure:"retry_on_failure"`
	PublicKey          string                                                   `mapstructure:"public_key"`
	SecretKey          configopaque.String                                      `mapstructure:"secret_key"`
	PassThrough        bool                                                     `mapstructure:"pass_through"`
	ServerVersionCheck ServerVersionCheck                                       `mapstructure:"server_version_check"`
	WritePath          WritePath                                                `mapstructure:"write_path"`
}
