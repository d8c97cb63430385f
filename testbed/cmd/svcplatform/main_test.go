package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc/svc-collector/testbed/platform"
)

func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name                   string
		args                   []string
		env                    map[string]string
		wantPublic, wantSecret string
		wantAddr, wantVersion  string
		wantErr                string
	}{
		{"keys from env", nil, map[string]string{"SVC_PUBLIC_KEY": "pk-env", "SVC_SECRET_KEY": "sk-env"}, "pk-env", "sk-env", "127.0.0.1:3000", "4.59.0", ""},
		{"flags win over env", []string{"-public-key", "pk-flag", "-secret-key", "sk-flag"}, map[string]string{"SVC_PUBLIC_KEY": "pk-env", "SVC_SECRET_KEY": "sk-env"}, "pk-flag", "sk-flag", "127.0.0.1:3000", "4.59.0", ""},
		{"listen and version", []string{"-listen", "127.0.0.1:4000", "-version", "4.58.0", "-public-key", "pk", "-secret-key", "sk"}, nil, "pk", "sk", "127.0.0.1:4000", "4.58.0", ""},
		{"no keys", nil, nil, "", "", "", "", "SVC_PUBLIC_KEY/SVC_SECRET_KEY"},
		{"no secret", []string{"-public-key", "pk"}, nil, "", "", "", "", "SVC_PUBLIC_KEY/SVC_SECRET_KEY"},
		{"stray argument", []string{"-public-key", "pk", "-secret-key", "sk", "extra"}, nil, "", "", "", "", "unexpected arguments"},
		{"unknown flag", []string{"-port", "3000"}, nil, "", "", "", "", "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, env(tt.env), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{c.opts.PublicKey, c.opts.SecretKey, c.opts.Addr, c.opts.Version}
			want := []string{tt.wantPublic, tt.wantSecret, tt.wantAddr, tt.wantVersion}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("config %v, want %v", got, want)
			}
		})
	}
}

func TestParseConfigWritePath(t *testing.T) {
	keys := env(map[string]string{"SVC_PUBLIC_KEY": "pk", "SVC_SECRET_KEY": "sk"})
	tests := []struct {
		name           string
		args           []string
		wantDeployment platform.Deployment
		wantDelay      time.Duration
		wantErr        string
	}{
		{"defaults", nil, platform.SelfHosted, platform.DefaultStagedDelay, ""},
		{"hosted new org", []string{"-deployment", "hosted-new-org", "-staged-delay", "500ms"}, platform.HostedNewOrg, 500 * time.Millisecond, ""},
		{"hosted old org, no delay", []string{"-deployment", "hosted-old-org", "-staged-delay", "-1s"}, platform.HostedOldOrg, -time.Second, ""},
		{"self-hosted by name", []string{"-deployment", "self-hosted"}, platform.SelfHosted, platform.DefaultStagedDelay, ""},
		{"unknown deployment", []string{"-deployment", "cloud"}, 0, 0, "unknown deployment"},
		{"bad delay", []string{"-staged-delay", "soon"}, 0, 0, "staged-delay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, keys, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.opts.Deployment != tt.wantDeployment || c.opts.StagedDelay != tt.wantDelay {
				t.Errorf("deployment %s, delay %v; want %s, %v", c.opts.Deployment, c.opts.StagedDelay, tt.wantDeployment, tt.wantDelay)
			}
		})
	}
}

func TestHelpDoesNotShowTheSecret(t *testing.T) {
	var help bytes.Buffer
	_, _ = parseConfig([]string{"-h"}, env(map[string]string{"SVC_SECRET_KEY": "sk-very-secret"}), &help)
	if strings.Contains(help.String(), "sk-very-secret") {
		t.Errorf("-h prints the secret key:\n%s", help.String())
	}
	if !strings.Contains(help.String(), "-secret-key") {
		t.Errorf("-h output lacks the flags:\n%s", help.String())
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdoutR, stdoutW := io.Pipe()
	var stderr safeBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-version", "4.61.0"},
			env(map[string]string{"SVC_PUBLIC_KEY": "pk", "SVC_SECRET_KEY": "sk-secret"}), stdoutW, &stderr)
		_ = stdoutW.Close()
	}()
	url, err := bufio.NewReader(stdoutR).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL printed: %v (stderr: %s)", err, stderr.String())
	}
	url = strings.TrimSpace(url)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q is not the URL", url)
	}

	resp, err := http.Get(url + "/api/public/health")
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]string
	err = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if err != nil || health["version"] != "4.61.0" {
		t.Errorf("health %v (%v), want version 4.61.0", health, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop after its context ended")
	}
	if _, err := http.Get(url + "/api/public/health"); err == nil {
		t.Error("the platform still answers after stopping")
	}
	if strings.Contains(stderr.String(), "sk-secret") {
		t.Errorf("the log shows the secret key:\n%s", stderr.String())
	}
}

func TestRunRefusesNonLoopback(t *testing.T) {
	err := run(context.Background(), []string{"-listen", "0.0.0.0:0"},
		env(map[string]string{"SVC_PUBLIC_KEY": "pk", "SVC_SECRET_KEY": "sk"}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("error %v, want one about loopback", err)
	}
}

// safeBuffer is a bytes.Buffer the server's goroutines and the test can share.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestParseProjects(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    int
		wantErr string
	}{
		{name: "two projects", value: "pk-a:sk-a, pk-b:sk-b", want: 2},
		{name: "missing secret", value: "pk-a:sk-a,pk-b", wantErr: "entry 2"},
		{name: "empty public key", value: ":sk-a", wantErr: "entry 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(nil, env(map[string]string{"SVC_PROJECTS": tt.value}), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "sk-a") {
					t.Fatalf("error %v, want one naming %q without a secret", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(c.projects) != tt.want {
				t.Fatalf("projects %v, error %v; want %d projects", c.projects, err, tt.want)
			}
		})
	}
}
