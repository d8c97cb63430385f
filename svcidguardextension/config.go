package svcidguardextension // import "github.com/svc/svc-collector/svcidguardextension"

import (
	"errors"
	"strings"
)

// Config is the configuration of the svcidguard extension.
type Config struct {
	// TracesPath is the HTTP path of span requests on the receivers that name the extension as a
	// middleware: the otlp receiver's traces_url_path (default /v1/traces). Other paths pass
	// untouched.
	TracesPath string `mapstructure:"traces_path"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config { return &Config{TracesPath: "/v1/traces"} }

// Validate checks that the traces path is an absolute path.
func (c *Config) Validate() error {
	if !strings.HasPrefix(c.TracesPath, "/") {
		return errors.New("traces_path must be an absolute URL path like /v1/traces (the otlp receiver's traces_url_path)")
	}
	return nil
}
