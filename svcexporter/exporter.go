package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/svc/svc-collector/pkg/writepath"
	"github.com/svc/svc-collector/svcexporter/internal/metadata"
)

// Paths of the platform's public API below `endpoint` (docs/contract.md §2, §11).
const (
	tracesPath = "/api/public/otel/v1/traces"
	scoresPath = "/api/public/scores"
	healthPath = "/api/public/health"
)

// userAgentName names the gateway in User-Agent, its only name on the wire: it sends no
// x-svc-sdk-name / x-svc-sdk-version, which would make the platform take every span batch for an
// SDK's traffic and decide its write path by it (README, "Headers sent to the platform").
const userAgentName = "svc-otelcol"

// ingestionDirect is the value of x-svc-ingestion-version that makes the platform write a span
// request at once (docs/contract.md §17), shared by every request that carries it.
var (
	ingestionVersionHeader = http.CanonicalHeaderKey(writepath.HeaderIngestionVersion)
	ingestionDirect        = []string{writepath.DirectIngestionVersion}
)

const (
	contentTypeProtobuf = "application/x-protobuf"
	contentTypeJSON     = "application/json"
	// maxResponseBytes bounds what is read of a response: bodies are small status documents.
	maxResponseBytes = 64 * 1024
	// maxErrorMessageBytes bounds the part of a server message quoted in an error.
	maxErrorMessageBytes = 512
)

type svcExporter struct {
	cfg       *Config
	settings  component.TelemetrySettings
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder

	// compression of span batches, resolved from the config and the environment.
	compression configcompression.Type
	// codec encodes and compresses span batches (the exporter compresses them itself, so that
	// the persistent queue stores them as they are sent: spans_request.go).
	codec     *spanBodyCodec
	tracesURL string
	scoresURL string
	healthURL string

	// static are the configured credentials (empty in pass-through mode, where each push uses its
	// request's own: see credentialsFor).
	static requestCredentials
	// refusedKeys are the public keys exporter_svc_credentials_refused has a series of (bounded).
	refusedMu   sync.Mutex
	refusedKeys map[string]struct{}
	userAgent   string

	// Neither client compresses: span bodies come compressed by codec (the SDKs compress span
	// batches only, docs/contract.md §4), scores and the health check go out as plain JSON.
	tracesClient *http.Client
	plainClient  *http.Client

	// versionCheck is the start-up check shared with the other exporters of this platform and
	// credentials (see versionChecks); released at shutdown.
	versionCheck        *sharedVersionCheck
	releaseVersionCheck func()

	// Attribute sets of the send_failed counters, built once.
	failedPermanent, failedRetryable metric.AddOption
	// pathAttrs are those of exporter_svc_span_requests_accepted, by write path.
	pathAttrs [numWirePaths]metric.AddOption
}

func newSvcExporter(cfg *Config, set exporter.Settings) (*svcExporter, error) {
	compression, err := resolveCompression(cfg.ClientConfig.Compression, nil)
	if err != nil {
		return nil, err
	}
	codec, err := newSpanBodyCodec(compression, cfg.ClientConfig.CompressionParams)
	if err != nil {
		return nil, err
	}
	codec.logger = set.Logger
	telemetry, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(cfg.ClientConfig.Endpoint, "/")
	version := set.BuildInfo.Version
	if version == "" {
		version = "unknown"
	}
	e := &svcExporter{
		cfg:             cfg,
		settings:        set.TelemetrySettings,
		logger:          set.Logger,
		telemetry:       telemetry,
		compression:     compression,
		codec:           codec,
		tracesURL:       base + tracesPath,
		scoresURL:       base + scoresPath,
		healthURL:       base + healthPath,
		static:          staticCredentials(cfg),
		userAgent:       fmt.Sprintf("%s/%s (%s/%s)", userAgentName, version, runtime.GOOS, runtime.GOARCH),
		failedPermanent: metric.WithAttributeSet(attribute.NewSet(attribute.Bool(errorPermanentKey, true))),
		failedRetryable: metric.WithAttributeSet(attribute.NewSet(attribute.Bool(errorPermanentKey, false))),
	}
	for p := range numWirePaths {
		e.pathAttrs[p] = metric.WithAttributeSet(attribute.NewSet(attribute.String("write_path", p.String())))
	}
	check, release := acquireVersionCheck(versionCheckKey{healthURL: e.healthURL, authorization: e.static.authorization, mode: cfg.ServerVersionCheck})
	e.versionCheck, e.releaseVersionCheck = check, sync.OnceFunc(release)
	// exporterhelper's batcher counts nothing of a batch MergeSplit drops (it only hands the
	// error to a request's completion): the exporter counts it, as it counts a batch it cannot send.
	codec.droppedUnreadable = func(ctx context.Context, spans int) {
		telemetry.ExporterSvcSendFailedSpans.Add(ctx, int64(spans), e.failedPermanent)
	}
	return e, nil
}

// start builds the HTTP clients (only now are the host's extensions, e.g. auth, known) and checks
// the platform's version.
func (e *svcExporter) start(ctx context.Context, host component.Host) error {
	tracesCfg := e.cfg.ClientConfig
	// The bodies come compressed (e.codec) with their Content-Encoding set; confighttp's
	// compression would skip them anyway, it is off so that nothing is compressed twice.
	tracesCfg.Compression = compressionNone
	client, err := tracesCfg.ToClient(ctx, host.GetExtensions(), e.settings)
	if err != nil {
		// Mostly a TLS file (tls::ca_file, cert_file, key_file) missing or unreadable.
		return fmt.Errorf("cannot build the HTTP client for the platform (check that every tls:: file exists and is readable by the collector's user): %w", err)
	}
	e.tracesClient = client

	plainCfg := e.cfg.ClientConfig
	plainCfg.Compression = compressionNone
	if e.plainClient, err = plainCfg.ToClient(ctx, host.GetExtensions(), e.settings); err != nil {
		return err
	}
	return e.versionCheck.run(func() error { return e.checkServerVersion(ctx) })
}

func (e *svcExporter) shutdown(context.Context) error {
	e.releaseVersionCheck()
	for _, c := range []*http.Client{e.tracesClient, e.plainClient} {
		if c != nil {
			c.CloseIdleConnections()
		}
	}
	e.telemetry.Shutdown()
	return nil
}

// newRequest makes a request to the platform with the credentials c and the svc headers (none of
// the credential headers when c is empty: the health check of a pass-through exporter).
// Headers set in the config (`headers`) are added by the client afterwards and win.
func (e *svcExporter) newRequest(ctx context.Context, c requestCredentials, method, url, contentType, contentEncoding string, body []byte) (*http.Request, error) {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, reader)
	if err != nil {
		return nil, err
	}
	if c.authorization != "" {
		req.Header.Set("Authorization", c.authorization)
		req.Header.Set("x-svc-public-key", c.publicKey)
	}
	req.Header.Set("User-Agent", e.userAgent)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if contentEncoding != "" {
		req.Header.Set("Content-Encoding", contentEncoding)
	}
	return req, nil
}

// response is what the exporter keeps of a successful (2xx) answer.
type response struct {
	code        int
	contentType string
	body        []byte
}

// post sends body (compressed as contentEncoding says, "" for none) and returns the 2xx response, or an error classified for the exporterhelper:
// retryable (network errors, 429, 5xx; with the Retry-After delay when the server gives one),
// a *statusError with code 413 (the caller splits), or permanent (every other status; the span
// path also splits on a permanent 400).
// A span request on the direct path (direct) carries x-svc-ingestion-version: 4.
func (e *svcExporter) post(ctx context.Context, c requestCredentials, client *http.Client, url, contentType, contentEncoding string, body []byte, direct bool) (response, error) {
	req, err := e.newRequest(ctx, c, http.MethodPost, url, contentType, contentEncoding, body)
	if err != nil {
		return response{}, consumererror.NewPermanent(err)
	}
	if direct {
		req.Header[ingestionVersionHeader] = ingestionDirect
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("sending to the svc platform failed: %w", err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, maxResponseBytes)
		_ = resp.Body.Close()
	}()
	respBody, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		if readErr != nil {
			// The platform took the data; only its answer was cut.
			e.logger.Debug("Reading the svc platform's response failed", zap.String("url", url), zap.Error(readErr))
		}
		return response{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: respBody}, nil
	}
	return response{}, e.classify(ctx, c, url, resp, respBody)
}

// statusError is a non-2xx answer of the platform.
type statusError struct {
	code    int
	url     string
	message string
}

func (se *statusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "svc platform answered HTTP %d %s to %s", se.code, http.StatusText(se.code), se.url)
	if se.message != "" {
		b.WriteString(": ")
		b.WriteString(se.message)
	}
	return b.String()
}

func (e *svcExporter) classify(ctx context.Context, c requestCredentials, url string, resp *http.Response, body []byte) error {
	se := &statusError{code: resp.StatusCode, url: url, message: e.serverMessage(c, resp.Header.Get("Content-Type"), body)}
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		// Counted per public key: on a multi-tenant gateway the refused tenant is the one to call.
		e.countRefused(ctx, c.publicKey, code)
		check := "check public_key and secret_key"
		if e.cfg.PassThrough {
			check = "the client sent these keys (pass-through): its project's keys are wrong or revoked"
		}
		se.message = strings.TrimSpace(fmt.Sprintf("the platform refused the credentials of public key %q; %s. %s", c.publicKey, check, se.message))
		return consumererror.NewPermanent(se)
	case code == http.StatusRequestEntityTooLarge:
		return se
	case code == http.StatusTooManyRequests || code >= 500:
		if delay, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
			return exporterhelper.NewThrottleRetry(se, delay)
		}
		return se
	default:
		return consumererror.NewPermanent(se)
	}
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(value string) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if seconds, err := strconv.Atoi(value); err == nil && seconds >= 0 {
		return time.Duration(seconds) * time.Second, true
	}
	if date, err := http.ParseTime(value); err == nil {
		return max(time.Until(date), 0), true
	}
	return 0, false
}

// serverMessage extracts a short, printable message from an error body: the message of an OTLP
// Status (protobuf), else the text itself. The secret is blanked in case a server echoes it.
func (e *svcExporter) serverMessage(c requestCredentials, contentType string, body []byte) string {
	if len(body) == 0 {
		return ""
	}
	msg := ""
	if strings.HasPrefix(contentType, contentTypeProtobuf) {
		st := &status.Status{}
		if err := proto.Unmarshal(body, st); err == nil {
			msg = st.GetMessage()
		}
	} else {
		msg = string(body)
	}
	msg = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, msg)
	msg = strings.TrimSpace(msg)
	msg = c.redact(msg)
	if len(msg) > maxErrorMessageBytes {
		msg = strings.ToValidUTF8(msg[:maxErrorMessageBytes], "") + "…"
	}
	return msg
}

// redact blanks the secret and the encoded credentials in a text that came from the server, in
// case the server echoes what it received.
func (c requestCredentials) redact(text string) string {
	encoded := strings.TrimPrefix(c.authorization, "Basic ")
	for _, secret := range []string{encoded, c.secretKey} {
		if secret != "" {
			text = strings.ReplaceAll(text, secret, "[REDACTED]")
		}
	}
	return text
}

// errorPermanentKey is the attribute of the send_failed counters, named as the exporterhelper's.
const errorPermanentKey = "error.permanent"

// outcome turns what happened to the items of a push into its result. Requests refused for good
// are logged here with the number of items lost, whatever the queue settings, and make a
// permanent error; a retryable error wins over them, since what it covers can still be
// delivered: retryRest makes the error that hands the items from `from` on back to the retry.
//
// It counts each item once on sent or failed. The exporterhelper's own otelcol_exporter_sent_* and
// send_failed_* cannot: its obsReportSender counts the whole request as failed on any error, and
// as sent on none (also what was dropped as too large).
func (e *svcExporter) outcome(ctx context.Context, res deliveryResult, total int, what string,
	sent, failed metric.Int64Counter, retryRest func(err error, from int) error,
) error {
	dropped := res.permanentItems + len(res.refusedAlone)
	if delivered := res.undeliveredFrom - dropped; delivered > 0 {
		sent.Add(ctx, int64(delivered))
	}
	if dropped > 0 {
		failed.Add(ctx, int64(dropped), e.failedPermanent)
	}
	if retried := total - res.undeliveredFrom; retried > 0 {
		failed.Add(ctx, int64(retried), e.failedRetryable)
	}
	var permanent error
	if len(res.permanent) > 0 {
		permanent = consumererror.NewPermanent(fmt.Errorf("svc platform refused %d of %d %s, not retried: %w",
			res.permanentItems, total, what, errors.Join(res.permanent...)))
		e.logger.Error("svc platform refused "+what+" for good; they are dropped",
			zap.Int("dropped", res.permanentItems), zap.Int("batch_size", total), zap.Error(permanent))
	}
	if res.retryErr != nil {
		return retryRest(res.retryErr, res.undeliveredFrom)
	}
	return permanent
}
