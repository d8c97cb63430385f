package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc/svc-collector/testbed/collector"
)

// The coverage table: written by TestInstrumentationMatrix into testbed/instrumentation/COVERAGE.md
// and copied into the svcspanfilter README between its coverage markers.

const (
	coverageBegin = "<!-- instrumentation coverage: begin (written by testbed/e2e TestInstrumentationMatrix) -->"
	coverageEnd   = "<!-- instrumentation coverage: end -->"
)

// pythonShape is a hand-written Python instrumentation shape of testbed/workload (PyPI is not
// reachable here), with the version of the library's public source it was checked against and
// what that check found.
type pythonShape struct {
	library, version, scope, checked string
}

// pythonShapes: see testbed/instrumentation/README.md, "Python shapes", for how each was checked.
var pythonShapes = []pythonShape{
	{"opentelemetry-instrumentation-openai-v2 (shape `genai-semconv`)", "2.4b0 (opentelemetry-python-contrib tag)", "opentelemetry.instrumentation.openai 0.44.1",
		"attributes differ from the source: 2.4b0 (with `gen_ai_latest_experimental`) writes `gen_ai.input.messages` as `{role, parts:[{type, content}]}` with the system prompt in `gen_ai.system_instructions`, under scope `opentelemetry.instrumentation.openai_v2`; the shape writes `{role, content}` under OpenLLMetry's scope name and version. Kept either way (gen_ai.*); the platform reads both message forms"},
	{"opentelemetry-instrumentation-openai-v2 (shape `genai-semconv-events`)", "2.0b0 (opentelemetry-python-contrib tag)", "opentelemetry.instrumentation.openai_v2 2.0b0",
		"does not match: 2.0b0 sends content as log events (`gen_ai.{role}.message`, `gen_ai.choice`, Events API), never as the span events `gen_ai.content.prompt/completion` the shape writes (neither name occurs in its source at that tag). The log-event form is covered by testbed/e2e content_test.go and by the real JS instrumentations above"},
	{"OpenLLMetry openai (shape `openllmetry`)", "0.40.7 (traceloop/openllmetry tag)", "opentelemetry.instrumentation.openai.v1 0.40.7",
		"matches in scope (`get_tracer(__name__)` of `openai/v1`), `gen_ai.prompt.N.role/content`, `gen_ai.completion.N.content/finish_reason`, `llm.request.type`, `llm.is_streaming`, `traceloop.association.properties.*`; differs in usage keys: 0.40.7 writes `gen_ai.usage.prompt_tokens/completion_tokens`, the shape `input_tokens/output_tokens` (the platform reads both)"},
	{"OpenInference openai (shape `openinference`)", "0.1.30 (Arize-ai/openinference tag)", "openinference.instrumentation.openai 0.1.30",
		"matches in scope, `openinference.span.kind`, `llm.model_name`, `llm.provider`, `llm.system`, `llm.input_messages.N.message.*`, token counts; differs in `output.value`: 0.1.30 writes the JSON of the whole response (`application/json`), the shape the answer text with `text/plain` (a mime type 0.1.30 never writes)"},
	{"OpenInference llama-index (workload agent retriever spans)", "4.3.0 (Arize-ai/openinference tag)", "openinference.instrumentation.llama_index 4.3.0",
		"scope matches (`get_tracer(__name__)`); `openinference.span.kind` RETRIEVER kept by the default filter"},
	{"svc SDK Python v5 (shape `svc-sdk`)", "not checked", "svc-sdk 5.1.0",
		"the svc SDKs' source is not among the public sources reachable here; the shape follows the platform contract (svc.observation.*)"},
}

func writeCoverage(t *testing.T, rows []coverageRow) {
	t.Helper()
	var b strings.Builder
	b.WriteString("| library | version | scope | what is kept | input / output from | masked | tree intact |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.library, r.versions, r.scopes, r.kept, r.source, r.masked, r.tree)
	}
	if len(pythonShapes) > 0 {
		b.WriteString("\nPython (PyPI is not reachable here: hand-written shapes of testbed/workload, checked against the library's source):\n\n")
		b.WriteString("| library | source checked at | scope | what the check found |\n|---|---|---|---|\n")
		for _, p := range pythonShapes {
			fmt.Fprintf(&b, "| %s | %s | `%s` | %s |\n", p.library, p.version, p.scope, p.checked)
		}
	}
	table := b.String()

	root := collector.RepoRoot()
	coverage := "# Instrumentation coverage\n\n" +
		"Written by `TestInstrumentationMatrix` (testbed/e2e) from its last green run: the real libraries of\n" +
		"this directory, through the gateway with the shipped `distribution/config.yaml`, read back from the\n" +
		"local platform. Input/output, type, model and usage are as the platform maps them.\n\n" + table
	if err := os.WriteFile(filepath.Join(root, "testbed", "instrumentation", "COVERAGE.md"), []byte(coverage), 0o644); err != nil {
		t.Errorf("write COVERAGE.md: %v", err)
	}
	readmePath := filepath.Join(root, "svcspanfilterprocessor", "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Errorf("read the svcspanfilter README: %v", err)
		return
	}
	s := string(readme)
	i, j := strings.Index(s, coverageBegin), strings.Index(s, coverageEnd)
	if i < 0 || j < i {
		t.Errorf("the svcspanfilter README has no coverage markers")
		return
	}
	s = s[:i+len(coverageBegin)] + "\n" + table + s[j:]
	if err := os.WriteFile(readmePath, []byte(s), 0o644); err != nil {
		t.Errorf("write the svcspanfilter README: %v", err)
	}
}
