package collector

import (
	"errors"
	"testing"
)

func TestLostPortRaceOnlyForPickedAddresses(t *testing.T) {
	picked := []string{"127.0.0.1:43083", "127.0.0.1:43084"}
	tests := []struct {
		name string
		err  string
		want bool
	}{
		{"a picked port taken", `failed to start "otlp" receiver: listen tcp 127.0.0.1:43083: bind: address already in use`, true},
		{"the caller's busy port", `listen tcp 127.0.0.1:5000: bind: address already in use`, false},
		{"a picked port, another error", `listen tcp 127.0.0.1:43084: bind: permission denied`, false},
		{"a port with the picked one as prefix", `listen tcp 127.0.0.1:430830: bind: address already in use`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lostPortRace(errors.New(tt.err), picked); got != tt.want {
				t.Errorf("lostPortRace(%q) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
