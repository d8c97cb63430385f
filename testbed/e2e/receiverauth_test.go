package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
)

// Receiver authentication of the single-key gateway (issue 11): distribution/config.yaml with the
// examples/receiver-token.yaml overlay (contrib's bearertokenauth).

const gatewayToken = "gw-token-e2e-6d1f8b2a9c4e7f30"

func receiverTokenConfigs() []string {
	return []string{collector.DefaultConfig(), collectorExample("receiver-token.yaml")}
}

func collectorExample(name string) string {
	return filepath.Join(collector.RepoRoot(), "distribution", "examples", name)
}

func TestReceiverTokenAuth(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		configs: receiverTokenConfigs(),
		env:     []string{"SVC_GATEWAY_TOKEN=" + gatewayToken},
		sets:    []string{"service::telemetry::logs::level=debug"},
	})
	project := platform.ProjectKeys{PublicKey: testPublicKey}
	tests := []struct {
		name    string
		header  string
		grpc    bool
		wantErr string // "" : delivered
	}{
		{name: "HTTP with the token", header: "Bearer " + gatewayToken},
		{name: "gRPC with the token", header: "Bearer " + gatewayToken, grpc: true},
		{name: "HTTP without a token", wantErr: "401"},
		{name: "gRPC without a token", grpc: true, wantErr: "Unauthenticated"},
		{name: "HTTP with a wrong token", header: "Bearer gw-token-wrong", wantErr: "401"},
		{name: "HTTP with the token but no scheme", header: gatewayToken, wantErr: "401"},
	}
	delivered := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			headers := map[string]string{}
			if tt.header != "" {
				headers["Authorization"] = tt.header
			}
			app := newAppWithHeaders(t, g.collector, project, headers, tt.grpc)
			s, err := app.emit(t, uint64(300+i), 1)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("export with the gateway token: %v", err)
				}
				delivered += s.spanCount()
				g.waitForSpans(t, delivered)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("export: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
	time.Sleep(time.Second) // anything wrongly accepted would have arrived by now
	if got := g.platform.Stats().UniqueSpans; got != delivered {
		t.Errorf("platform holds %d spans, want only the %d sent with the token", got, delivered)
	}
	for i, line := range strings.Split(g.collector.Logs(), "\n") {
		for _, secret := range []string{gatewayToken, testSecretKey} {
			if strings.Contains(line, secret) {
				t.Errorf("collector log line %d holds a secret: %.200s", i+1, line)
			}
		}
	}
}

// TestReceiverTokenUnsetRefusesToStart: without SVC_GATEWAY_TOKEN the overlay does not start a
// gateway that would take an empty token.
func TestReceiverTokenUnsetRefusesToStart(t *testing.T) {
	p := startPlatform(t, "")
	opts := gatewayOptions{configs: receiverTokenConfigs()}.collectorOptions(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := collector.Start(ctx, opts)
	if err == nil {
		_ = c.Stop()
		t.Fatal("the gateway started without a token")
	}
	if !strings.Contains(err.Error(), "no bearer token provided") {
		t.Fatalf("start failed with %v, want the extension's `no bearer token provided`", err)
	}
}
