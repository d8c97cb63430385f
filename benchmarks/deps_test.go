package benchmarks

import (
	_ "github.com/open-telemetry/opentelemetry-collector-contrib/processor/filterprocessor"
	_ "github.com/open-telemetry/opentelemetry-collector-contrib/processor/redactionprocessor"
	_ "github.com/open-telemetry/opentelemetry-collector-contrib/processor/transformprocessor"
	_ "go.opentelemetry.io/collector/processor/processortest"
)
