package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"google.golang.org/grpc/credentials"

	"github.com/svc/svc-collector/testbed/collector"
	"github.com/svc/svc-collector/testbed/platform"
)

// TLS on the receivers (issue 11): distribution/examples/tls.yaml over the default config, with
// certificates this test makes itself.

// testPKI is a CA, a server certificate for 127.0.0.1 signed by it, and a client certificate
// signed by it, as PEM files in a directory.
type testPKI struct {
	caFile, serverCert, serverKey string
	ca                            *x509.CertPool
	client                        tls.Certificate
	otherCA                       *x509.CertPool // a CA that signed none of them
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caCert, caKey := makeCert(t, "svc e2e CA", nil, nil, true)
	serverCert, serverKey := makeCert(t, "svc-otelcol", caCert, caKey, false)
	clientCert, clientKey := makeCert(t, "team-a service", caCert, caKey, false)
	otherCA, _ := makeCert(t, "other CA", nil, nil, true)
	pki := &testPKI{
		caFile:     writePEM(t, dir, "ca.crt", "CERTIFICATE", caCert.Raw),
		serverCert: writePEM(t, dir, "server.crt", "CERTIFICATE", serverCert.Raw),
		serverKey:  writePEM(t, dir, "server.key", "PRIVATE KEY", marshalKey(t, serverKey)),
		ca:         x509.NewCertPool(),
		otherCA:    x509.NewCertPool(),
		client:     tls.Certificate{Certificate: [][]byte{clientCert.Raw}, PrivateKey: clientKey},
	}
	pki.ca.AddCert(caCert)
	pki.otherCA.AddCert(otherCA)
	return pki
}

// makeCert makes a certificate signed by parent (self-signed when parent is nil).
func makeCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.IPAddresses, tmpl.DNSNames, tmpl.ExtKeyUsage = nil, nil, nil
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func marshalKey(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newTLSApp sends to the gateway over OTLP/HTTP or gRPC with TLS config cfg (nil: plain text).
func newTLSApp(t *testing.T, c *collector.Process, cfg *tls.Config, grpc bool) *tenantApp {
	t.Helper()
	var exp sdktrace.SpanExporter
	var err error
	switch {
	case grpc && cfg != nil:
		exp, err = otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(c.OTLPGRPCEndpoint),
			otlptracegrpc.WithTLSCredentials(credentials.NewTLS(cfg)), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	case grpc:
		exp, err = otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(c.OTLPGRPCEndpoint),
			otlptracegrpc.WithInsecure(), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	case cfg != nil:
		exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(c.OTLPHTTPEndpoint),
			otlptracehttp.WithTLSClientConfig(cfg), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	default:
		exp, err = otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(c.OTLPHTTPEndpoint),
			otlptracehttp.WithInsecure(), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	}
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("tls-client"))),
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tenantApp{keys: platform.ProjectKeys{PublicKey: "tls-client"}, tp: tp}
}

func TestTLSReceivers(t *testing.T) {
	pki := newTestPKI(t)
	trusting := &tls.Config{RootCAs: pki.ca, MinVersion: tls.VersionTLS12}
	withClientCert := &tls.Config{RootCAs: pki.ca, Certificates: []tls.Certificate{pki.client}, MinVersion: tls.VersionTLS12}
	untrusting := &tls.Config{RootCAs: pki.otherCA, MinVersion: tls.VersionTLS12}
	type client struct {
		name      string
		cfg       *tls.Config
		grpc      bool
		delivered bool
	}
	tests := []struct {
		name     string
		clientCA bool
		clients  []client
	}{
		{name: "server TLS", clients: []client{
			{name: "HTTPS trusting the CA", cfg: trusting, delivered: true},
			{name: "gRPC TLS trusting the CA", cfg: trusting, grpc: true, delivered: true},
			{name: "plain HTTP", cfg: nil},
			{name: "plain gRPC", cfg: nil, grpc: true},
			{name: "HTTPS trusting another CA", cfg: untrusting},
		}},
		{name: "mutual TLS", clientCA: true, clients: []client{
			{name: "HTTPS with a client certificate", cfg: withClientCert, delivered: true},
			{name: "gRPC with a client certificate", cfg: withClientCert, grpc: true, delivered: true},
			{name: "HTTPS without a client certificate", cfg: trusting},
			{name: "gRPC without a client certificate", cfg: trusting, grpc: true},
		}},
	}
	p := startPlatform(t, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.Reset()
			env := []string{"SVC_TLS_CERT_FILE=" + pki.serverCert, "SVC_TLS_KEY_FILE=" + pki.serverKey}
			if tt.clientCA {
				env = append(env, "SVC_TLS_CLIENT_CA_FILE="+pki.caFile)
			}
			g := startGateway(t, gatewayOptions{platform: p, env: env,
				configs: []string{collector.DefaultConfig(), collectorExample("tls.yaml")}})
			delivered := 0
			for i, cl := range tt.clients {
				t.Run(cl.name, func(t *testing.T) {
					s, err := newTLSApp(t, g.collector, cl.cfg, cl.grpc).emit(t, uint64(900+i), 1)
					if !cl.delivered {
						if err == nil {
							t.Fatal("the gateway accepted the export")
						}
						return
					}
					if err != nil {
						t.Fatalf("export: %v", err)
					}
					delivered += s.spanCount()
					g.waitForSpans(t, delivered)
				})
			}
			time.Sleep(500 * time.Millisecond)
			if got := p.Stats().UniqueSpans; got != delivered {
				t.Errorf("platform holds %d spans, want the %d of the accepted clients only", got, delivered)
			}
		})
	}
}
