package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/collector"
)

// TestStartErrorTwoInstancesOneStorageDirectory: a second gateway started on the storage
// directory of a running one fails at once, with an error that names the directory and says to
// give each instance its own SVC_STORAGE_DIR; the running gateway is not disturbed.
func TestStartErrorTwoInstancesOneStorageDirectory(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	opts := gatewayOptions{platform: g.platform}.collectorOptions(t, g.platform)
	opts.StorageDir = g.collector.StorageDir
	opts.StartTimeout = 30 * time.Second
	started := time.Now()
	second, err := collector.Start(context.Background(), opts)
	if err == nil {
		_ = second.Stop()
		t.Fatal("a second gateway started on the storage directory of a running one")
	}
	msg := errorLine(err.Error())
	t.Logf("second gateway, after %s: %s", time.Since(started).Round(time.Millisecond), msg)
	for _, want := range []string{
		"svc_file_storage directory " + g.collector.StorageDir + " is in use by another collector instance",
		"give each instance its own directory (SVC_STORAGE_DIR",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("start error %q does not say %q", msg, want)
		}
	}
	resp, err := http.Get("http://" + g.collector.HealthEndpoint + "/")
	if err != nil {
		t.Fatalf("the running gateway's health after the second start: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the running gateway's health after the second start: %s", resp.Status)
	}
}

// TestStartErrorsAnOperatorCauses: each start failure an operator can cause says what is wrong
// and where: a port in use names its address, an unreadable certificate its file, a platform URL
// without scheme the URL to write.
func TestStartErrorsAnOperatorCauses(t *testing.T) {
	p := startPlatform(t, "")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	missingCA := filepath.Join(t.TempDir(), "missing-ca.pem")
	unreadable := filepath.Join(t.TempDir(), "unreadable-ca.pem")
	if err := os.WriteFile(unreadable, []byte("not a certificate"), 0o000); err != nil {
		t.Fatal(err)
	}
	hostPort := strings.TrimPrefix(p.URL(), "http://")
	tests := []struct {
		name string
		env  []string
		sets []string
		want []string
	}{
		{
			name: "OTLP port in use",
			env:  []string{"SVC_OTLP_HTTP_ENDPOINT=" + busy.Addr().String()},
			want: []string{`failed to start "otlp" receiver`, busy.Addr().String(), "address already in use"},
		},
		{
			name: "metrics port in use",
			env:  []string{"SVC_METRICS_PORT=" + strings.TrimPrefix(busy.Addr().String(), "127.0.0.1:")},
			want: []string{"Prometheus exporter", busy.Addr().String(), "address already in use"},
		},
		{
			name: "missing CA file",
			sets: []string{"exporters::svc::tls::ca_file=" + missingCA},
			want: []string{`failed to start "svc" exporter`, "check that every tls:: file exists and is readable", missingCA},
		},
		{
			name: "platform URL without scheme",
			env:  []string{"SVC_ENDPOINT=" + hostPort},
			want: []string{"exporters::svc: endpoint must be an absolute http:// or https:// URL", `write "https://` + hostPort + `"`},
		},
	}
	if os.Geteuid() != 0 { // root reads any file
		tests = append(tests, struct {
			name string
			env  []string
			sets []string
			want []string
		}{name: "unreadable CA file", sets: []string{"exporters::svc::tls::ca_file=" + unreadable}, want: []string{unreadable, "permission denied"}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := gatewayOptions{env: tt.env, sets: tt.sets}.collectorOptions(t, p)
			// The test's env comes after collector.Start's own endpoints and wins.
			opts.StartTimeout = 30 * time.Second
			c, err := collector.Start(context.Background(), opts)
			if err == nil {
				_ = c.Stop()
				t.Fatal("the collector started")
			}
			msg := errorLine(err.Error())
			t.Logf("%s", msg)
			for _, want := range tt.want {
				if !strings.Contains(msg, want) {
					t.Errorf("start error %q does not say %q", msg, want)
				}
			}
		})
	}
}

// errorLine is the collector's own final "Error: ..." line out of collector.Start's error (which
// carries the whole output), or the error itself.
func errorLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "Error: ") {
			return lines[i]
		}
	}
	return s
}
