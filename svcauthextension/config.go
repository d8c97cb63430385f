package svcauthextension // import "github.com/svc/svc-collector/svcauthextension"

import (
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/component"
)

// Config is the configuration of the svcauth authenticator.
type Config struct {
	// AllowedPublicKeys, when set, are the only public keys let in: a gateway run for known teams
	// refuses the keys of any other project at the receiver. Empty: any well-formed key pair is
	// let in and the platform decides (pass-through).
	AllowedPublicKeys []string `mapstructure:"allowed_public_keys"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

// Validate refuses blank or duplicated public keys and secret keys put in the list by mistake.
func (cfg *Config) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, k := range cfg.AllowedPublicKeys {
		switch {
		case strings.TrimSpace(k) == "":
			errs = append(errs, fmt.Errorf("allowed_public_keys[%d] is empty", i))
		case strings.HasPrefix(k, "sk-"):
			// Said without the value: it is a secret.
			errs = append(errs, fmt.Errorf("allowed_public_keys[%d] looks like a secret key (sk-...); list public keys (pk-...) only", i))
		case seen[k]:
			errs = append(errs, fmt.Errorf("allowed_public_keys[%d] %q is listed twice", i, k))
		}
		seen[k] = true
	}
	return errors.Join(errs...)
}
