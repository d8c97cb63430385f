package svcexporter // import "github.com/svc/svc-collector/svcexporter"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/pkg/credentials"
)

// requestCredentials are the credentials one push is sent with: the configured ones, or in
// pass-through mode those of the request the data came in with.
type requestCredentials struct {
	publicKey string
	secretKey string
	// authorization is the Authorization header value; it is only ever put in a request header.
	authorization string
}

func staticCredentials(cfg *Config) requestCredentials {
	if cfg.PassThrough {
		return requestCredentials{}
	}
	c := credentials.Credentials{PublicKey: cfg.PublicKey, SecretKey: string(cfg.SecretKey)}
	return requestCredentials{publicKey: c.PublicKey, secretKey: c.SecretKey, authorization: c.Header()}
}

// credentialsFor returns the credentials a push of items goes with. In pass-through mode they are
// the `authorization` client metadata of the request the items came in with (the receiver's
// include_metadata; the queue keeps it with each item, on disk too, and partitions batches by it).
// Without usable credentials the push cannot go anywhere: it is refused for good, counted and
// logged, without quoting what was there.
func (e *svcExporter) credentialsFor(ctx context.Context, items int, what string, failed metric.Int64Counter) (requestCredentials, error) {
	if !e.cfg.PassThrough {
		return e.static, nil
	}
	c, err := credentials.FromValues(client.FromContext(ctx).Metadata.Get(credentials.MetadataKey))
	if err != nil {
		failed.Add(ctx, int64(items), e.failedPermanent)
		err = consumererror.NewPermanent(fmt.Errorf("pass_through: the request these %d %s came with carries no usable svc credentials in its client metadata: %w; "+
			"give the receiver `include_metadata: true` and the `svcauth` authenticator, and keep `authorization` in the metadata_keys of any batch processor in between", items, what, err))
		e.logger.Error("svc exporter dropped "+what+" that came without credentials", zap.Int("dropped", items), zap.Error(err))
		return requestCredentials{}, err
	}
	return requestCredentials{publicKey: c.PublicKey, secretKey: c.SecretKey, authorization: c.Header()}, nil
}

// Attribute names of exporter_svc_credentials_refused.
const (
	attrPublicKey  = "public_key"
	attrStatusCode = "http.response.status_code"
)

// maxRefusedKeys bounds the public keys exporter_svc_credentials_refused has a series of: a
// pass-through gateway without svcauth's allowed_public_keys lets in any well-formed key pair, and
// each refused one would otherwise be a new series for as long as the collector runs.
const maxRefusedKeys = 1000

// otherPublicKeys is the public_key of the refusals beyond maxRefusedKeys distinct keys.
const otherPublicKeys = "other"

// countRefused counts one request refused with 401/403, by public key and status.
func (e *svcExporter) countRefused(ctx context.Context, publicKey string, code int) {
	e.telemetry.ExporterSvcCredentialsRefused.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(attrPublicKey, e.refusedLabel(publicKey)), attribute.Int(attrStatusCode, code))))
}

// refusedLabel is publicKey while fewer than maxRefusedKeys distinct keys were counted, then
// otherPublicKeys for new ones.
func (e *svcExporter) refusedLabel(publicKey string) string {
	e.refusedMu.Lock()
	defer e.refusedMu.Unlock()
	if _, ok := e.refusedKeys[publicKey]; ok {
		return publicKey
	}
	if len(e.refusedKeys) >= maxRefusedKeys {
		return otherPublicKeys
	}
	if e.refusedKeys == nil {
		e.refusedKeys = map[string]struct{}{}
	}
	e.refusedKeys[publicKey] = struct{}{}
	return publicKey
}
