package svcevaluatorconnector

import (
	"context"
	"fmt"
	"math"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
)

// General checks written in OTTL (contrib's pkg/ottl, span context: span.*, resource.*,
// instrumentation_scope.*, with OTTL's standard converters): a condition makes a BOOLEAN score,
// a value expression a NUMERIC one, so that users write their own rules without code.

// ottlParser parses the checks. It is built without the component's telemetry: parsing happens
// when the configuration is validated, before the component exists, and the parser only
// reports through errors.
func ottlParser() (ottl.Parser[*ottlspan.TransformContext], error) {
	set := component.TelemetrySettings{
		Logger:         zap.NewNop(),
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
	}
	return ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set, ottlspan.EnablePathContextNames())
}

func compileOTTLCondition(text string) (*ottl.Condition[*ottlspan.TransformContext], error) {
	p, err := ottlParser()
	if err != nil {
		return nil, err
	}
	return p.ParseCondition(text)
}

func compileOTTLValue(text string) (*ottl.ValueExpression[*ottlspan.TransformContext], error) {
	p, err := ottlParser()
	if err != nil {
		return nil, err
	}
	return p.ParseValueExpression(text)
}

// errNotANumber is a value expression whose result is not a number.
type errNotANumber struct{ value any }

func (e errNotANumber) Error() string {
	return fmt.Sprintf("the OTTL value is %T, not a number", e.value)
}

// ottlNumber is a value expression's result as a score value: ok is false when the expression
// found nothing (nil: the attribute it reads is absent).
func ottlNumber(ctx context.Context, e *ottl.ValueExpression[*ottlspan.TransformContext], tCtx *ottlspan.TransformContext) (float64, bool, error) {
	v, err := e.Eval(ctx, tCtx)
	if err != nil {
		return 0, false, err
	}
	switch n := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return float64(n), true, nil
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return 0, false, errNotANumber{n}
		}
		return n, true, nil
	case bool:
		if n {
			return 1, true, nil
		}
		return 0, true, nil
	}
	return 0, false, errNotANumber{v}
}
