package svcscoreconnector

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/svc/svc-collector/svcscoreconnector/internal/metadata"
)

// NewFactory returns the factory of the svcscore connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		connector.WithTracesToLogs(createTracesToLogs, metadata.TracesToLogsStability),
		connector.WithLogsToLogs(createLogsToLogs, metadata.LogsToLogsStability),
	)
}

func createTracesToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Traces, error) {
	return newScoreConnector(set, cfg.(*Config), next)
}

func createLogsToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Logs, error) {
	return newScoreConnector(set, cfg.(*Config), next)
}
