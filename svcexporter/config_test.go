package svcexporter

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/svc/svc-collector/svcexporter/internal/metadata"
)

// loadConfig reads the config with the given name from testdata/config.yaml over the defaults,
// as the collector does, and validates it.
func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err != nil {
		return cfg, err
	}
	return cfg, confmap.Validate(cfg)
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		wantErr []string // every part must be in the error
		check   func(t *testing.T, cfg *Config)
	}{
		{
			name: "minimal",
			check: func(t *testing.T, cfg *Config) {
				assert.Equal(t, "https://cloud.svc.example", cfg.ClientConfig.Endpoint)
				assert.Equal(t, "pk-lf-1234", cfg.PublicKey)
				assert.Equal(t, configopaque.String("sk-lf-5678"), cfg.SecretKey)
				assert.Equal(t, VersionCheckEnforce, cfg.ServerVersionCheck)
				assert.Equal(t, WritePathAuto, cfg.WritePath)
				assert.Equal(t, configcompression.Type(""), cfg.ClientConfig.Compression, "unset: the environment decides")
				assert.Equal(t, 30*time.Second, cfg.ClientConfig.Timeout)
				assert.True(t, cfg.QueueConfig.HasValue(), "the sending queue is on by default")
				assert.True(t, cfg.RetryConfig.Enabled, "retry is on by default")
			},
		},
		{
			name: "full",
			check: func(t *testing.T, cfg *Config) {
				assert.Equal(t, "https://svc.internal.example:8443/base", cfg.ClientConfig.Endpoint)
				assert.Equal(t, VersionCheckWarn, cfg.ServerVersionCheck)
				assert.Equal(t, compressionNone, cfg.ClientConfig.Compression)
				assert.Equal(t, 10*time.Second, cfg.ClientConfig.Timeout)
				assert.Equal(t, "http://proxy.internal.example:3128", cfg.ClientConfig.ProxyURL)
				assert.True(t, cfg.ClientConfig.TLS.InsecureSkipVerify)
				assert.Equal(t, 8, cfg.ClientConfig.MaxConnsPerHost)
				v, ok := cfg.ClientConfig.Headers.Get("x-team")
				assert.True(t, ok)
				assert.Equal(t, configopaque.String("platform"), v)
				require.True(t, cfg.QueueConfig.HasValue())
				q := cfg.QueueConfig.Get()
				assert.Equal(t, 4, q.NumConsumers)
				assert.Equal(t, int64(5000), q.QueueSize)
				require.NotNil(t, q.StorageID)
				assert.Equal(t, "file_storage/svc", q.StorageID.String())
				require.True(t, q.Batch.HasValue())
				assert.Equal(t, int64(1000), q.Batch.Get().MaxSize)
				assert.Equal(t, time.Second, cfg.RetryConfig.InitialInterval)
				assert.Equal(t, 10*time.Second, cfg.RetryConfig.MaxInterval)
				assert.Equal(t, 2*time.Minute, cfg.RetryConfig.MaxElapsedTime)
			},
		},
		{
			name: "version_check_off",
			check: func(t *testing.T, cfg *Config) {
				assert.Equal(t, VersionCheckOff, cfg.ServerVersionCheck)
			},
		},
		{
			name: "no_queue",
			check: func(t *testing.T, cfg *Config) {
				assert.False(t, cfg.QueueConfig.HasValue())
			},
		},
		{
			name: "pass_through",
			check: func(t *testing.T, cfg *Config) {
				assert.True(t, cfg.PassThrough)
				assert.Empty(t, cfg.PublicKey)
				q := queueConfig(cfg)
				require.True(t, q.HasValue() && q.Get().Batch.HasValue())
				assert.Equal(t, []string{"authorization"}, q.Get().Batch.Get().Partition.MetadataKeys,
					"pass-through batches are always partitioned by the request's credentials")
				assert.Empty(t, cfg.QueueConfig.Get().Batch.Get().Partition.MetadataKeys, "the loaded config itself is left as written")
			},
		},
		{name: "pass_through_with_keys", wantErr: []string{"pass_through sends each request's own credentials: public_key and secret_key must not be set"}},
		{name: "pass_through_with_auth_header", wantErr: []string{"headers must not set authorization", "headers must not set X-Svc-Public-Key"}},
		{name: "pass_through_with_authenticator", wantErr: []string{"auth (a client authenticator) must not be set"}},
		{name: "missing_endpoint", wantErr: []string{"endpoint must be set"}},
		{name: "relative_endpoint", wantErr: []string{"endpoint must be an absolute http:// or https:// URL", "cloud.svc.example/api", `write "https://cloud.svc.example/api"`}},
		{name: "host_port_endpoint", wantErr: []string{"endpoint must be an absolute http:// or https:// URL", `got "127.0.0.1:3000", which has no scheme: write "https://127.0.0.1:3000"`}},
		{name: "ftp_endpoint", wantErr: []string{"endpoint must be an absolute http:// or https:// URL", "ftp://"}},
		{name: "endpoint_with_credentials", wantErr: []string{"endpoint must not carry credentials"}},
		{name: "endpoint_with_credentials_no_scheme", wantErr: []string{"endpoint must not carry credentials"}},
		{name: "ftp_endpoint_with_credentials", wantErr: []string{"endpoint must not carry credentials"}},
		{name: "endpoint_with_token_query", wantErr: []string{"without query or fragment", `"https://cloud.svc.example/api"`}},
		{name: "missing_public_key", wantErr: []string{"public_key must be set"}},
		{name: "missing_secret_key", wantErr: []string{"secret_key must be set"}},
		{
			name: "write_path_never",
			check: func(t *testing.T, cfg *Config) {
				assert.Equal(t, WritePathNever, cfg.WritePath)
			},
		},
		{name: "bad_write_path", wantErr: []string{"write_path must be one of auto, always, never", `"sometimes"`}},
		{name: "path_headers", wantErr: []string{
			"headers must not set x-svc-ingestion-version", "headers must not set X_SVC_SDK_NAME", "headers must not set X-Svc-Sdk-Version", "use write_path"}},
		{name: "bad_version_check", wantErr: []string{"server_version_check must be one of enforce, warn, off", `"strict"`}},
		{
			name: "compression_level",
			check: func(t *testing.T, cfg *Config) {
				assert.Equal(t, configcompression.Level(6), cfg.ClientConfig.CompressionParams.Level)
			},
		},
		{name: "bad_compression_level", wantErr: []string{"compression_params", "unsupported parameters {Level:12}"}},
		{name: "unsupported_compression", wantErr: []string{"compression must be gzip or none", `"zstd"`}},
		{name: "unknown_compression", wantErr: []string{"brotli"}},
		{name: "unknown_key", wantErr: []string{"secret"}},
		{name: "unknown_nested_key", wantErr: []string{"insecure_skip_verfy"}},
		{name: "unknown_retry_key", wantErr: []string{"max_retries"}},
		{name: "bad_queue", wantErr: []string{"queue_size"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(t, tt.name)
			if len(tt.wantErr) > 0 {
				require.Error(t, err)
				for _, part := range tt.wantErr {
					assert.Contains(t, err.Error(), part)
				}
				assert.NotContains(t, err.Error(), "sk-lf-5678", "an error must not show the secret key")
				return
			}
			require.NoError(t, err)
			tt.check(t, cfg)
		})
	}
}

func TestUnknownKeyErrorNamesTheKey(t *testing.T) {
	_, err := loadConfig(t, "unknown_key")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid keys: secret`)
}

func TestConfigNeverPrintsTheSecret(t *testing.T) {
	cfg, err := loadConfig(t, "full")
	require.NoError(t, err)
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		assert.NotContains(t, fmt.Sprintf(format, cfg), "sk-lf-5678", format)
		assert.NotContains(t, fmt.Sprintf(format, *cfg), "sk-lf-5678", format)
	}
}

// TestStrictConfigMirrorsConfig keeps the key check of Unmarshal in step with Config: the same
// fields, keys and types, but for the HTTP client settings that lose their methods.
func TestStrictConfigMirrorsConfig(t *testing.T) {
	cfgType, strictType := reflect.TypeFor[Config](), reflect.TypeFor[strictConfig]()
	var want, got []string
	for i := 0; i < cfgType.NumField(); i++ {
		f := cfgType.Field(i)
		if !f.IsExported() {
			continue
		}
		typ := f.Type
		if typ == reflect.TypeFor[confighttp.ClientConfig]() {
			typ = reflect.TypeFor[strictClientConfig]()
		}
		want = append(want, fmt.Sprintf("%s %s %s", f.Name, typ, f.Tag))
	}
	for i := 0; i < strictType.NumField(); i++ {
		f := strictType.Field(i)
		got = append(got, fmt.Sprintf("%s %s %s", f.Name, f.Type, f.Tag))
	}
	assert.Equal(t, want, got)
}
