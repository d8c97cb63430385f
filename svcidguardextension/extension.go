package svcidguardextension // import "github.com/svc/svc-collector/svcidguardextension"

import (
	"context"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/svc/svc-collector/svcidguardextension/internal/metadata"
)

// guard is the svcidguard extension: an HTTP and gRPC server middleware of the receivers that
// name it.
type guard struct {
	cfg       *Config
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	reasons   map[string]metric.MeasurementOption
}

func newGuard(cfg *Config, set component.TelemetrySettings) (*guard, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	g := &guard{cfg: cfg, logger: set.Logger, telemetry: tb, reasons: map[string]metric.MeasurementOption{}}
	for _, reason := range []string{reasonTraceID, reasonSpanID} {
		g.reasons[reason] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason)))
	}
	return g, nil
}

func (*guard) Start(context.Context, component.Host) error { return nil }

func (g *guard) Shutdown(context.Context) error {
	g.telemetry.Shutdown()
	return nil
}

// report counts and logs what one request lost: counts by reason, where the spans came from and
// who sent them, never their content.
func (g *guard) report(ctx context.Context, r *refusals) {
	for reason, n := range r.byReason {
		g.telemetry.SvcidguardSpansRefused.Add(ctx, n, g.reasons[reason])
	}
	fields := []zap.Field{
		zap.Int64("refused", r.total()),
		zap.Any("by_reason", r.byReason),
		zap.Strings("sources", r.sourceList()),
	}
	if addr := client.FromContext(ctx).Addr; addr != nil {
		fields = append(fields, zap.String("client_address", addr.String()))
	}
	g.logger.Warn("Refused spans with an empty or all-zero trace or span id; the rest of the request goes on", fields...)
}
