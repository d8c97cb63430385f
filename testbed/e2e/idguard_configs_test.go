package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/svc/svc-collector/testbed/collector"
)

// TestDistributionConfigsGuardZeroIDs: every standalone gateway config we ship (one with its own
// receivers and pipelines, where applications send) puts the svcidguard middleware on each OTLP
// protocol and runs the extension, so a span with an all-zero id is refused alone whichever
// config a user starts from. Overlays inherit it from the config they are merged over.
func TestDistributionConfigsGuardZeroIDs(t *testing.T) {
	root := collector.RepoRoot()
	examples, err := filepath.Glob(filepath.Join(root, "distribution", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	configs := append([]string{
		filepath.Join(root, "distribution", "config.yaml"),
		// The tier applications send to; the gateway tier behind it receives only from routers.
		filepath.Join(root, "distribution", "examples", "two-tier", "router.yaml"),
	}, examples...)
	protocol := regexp.MustCompile(`^      (grpc|http):\s*$`)
	checked := 0
	for _, path := range configs {
		if !wholeConfig(t, path) {
			continue
		}
		checked++
		name, _ := filepath.Rel(root, path)
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(b), "\n")
			section, receiver, proto := "", "", ""
			guarded := map[string]bool{}
			for _, line := range lines {
				switch {
				case strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
					continue
				case !strings.HasPrefix(line, " "):
					section, receiver, proto = strings.TrimSuffix(strings.TrimSpace(line), ":"), "", ""
				case section == "receivers" && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   "):
					receiver, proto = strings.TrimSuffix(strings.TrimSpace(line), ":"), ""
				case section == "receivers" && receiver == "otlp" && protocol.MatchString(line):
					proto = protocol.FindStringSubmatch(line)[1]
					guarded[proto] = false
				case proto != "" && strings.HasPrefix(line, "        ") && strings.Contains(line, "middlewares:") && strings.Contains(line, "svcidguard"):
					guarded[proto] = true
				case proto != "" && !strings.HasPrefix(line, "        "):
					proto = ""
				}
			}
			if len(guarded) == 0 {
				t.Fatalf("no OTLP receiver protocol found")
			}
			for p, ok := range guarded {
				if !ok {
					t.Errorf("receivers::otlp::protocols::%s has no `middlewares: [{id: svcidguard}]`", p)
				}
			}
			text := "\n" + string(b)
			if !strings.Contains(text, "\n  svcidguard:") {
				t.Errorf("extensions:: has no svcidguard")
			}
			if !regexp.MustCompile(`\n  extensions: \[[^\]]*\bsvcidguard\b`).MatchString(text) {
				t.Errorf("service::extensions does not run svcidguard")
			}
		})
	}
	if checked < 4 {
		t.Fatalf("only %d standalone configs found", checked)
	}
}
