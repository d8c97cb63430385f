package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc/svc-collector/testbed/collector"
)

// The coverage table: TestInstrumentationMatrix compares the table of its run with the committed
// one (testbed/instrumentation/COVERAGE.md and the svcspanfilter README between its coverage
// markers) and fails on any difference; with -update-coverage (or SVC_UPDATE_COVERAGE=1) it writes
// the run's table into both instead, whatever the run found ("no" in masked or tree intact included).

var updateCoverage = flag.Bool("update-coverage", false,
	"TestInstrumentationMatrix writes its coverage table into testbed/instrumentation/COVERAGE.md and the svcspanfilter README")

const coverageUpdateHint = "run `cd testbed && SVC_OTELCOL_BIN=$PWD/../bin/svc-otelcol go test -count=1 -run TestInstrumentationMatrix ./e2e/ -update-coverage` " +
	"(or SVC_UPDATE_COVERAGE=1) and commit COVERAGE.md and svcspanfilterprocessor/README.md"

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

// coverageTable renders the rows and the Python shapes as markdown.
func coverageTable(rows []coverageRow) string {
	var b strings.Builder
	b.WriteString("| library | version | scope | what is kept | prompt / answer carried in | masked | tree intact |\n")
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
	return b.String()
}

const coverageHeading = "# Instrumentation coverage\n\n" +
	"Written by `TestInstrumentationMatrix` (testbed/e2e) with `-update-coverage`: the real libraries of\n" +
	"this directory, through the gateway with the shipped `distribution/config.yaml`, read back from the\n" +
	"local platform. Input/output, type, model and usage are as the platform maps them. Every run of the\n" +
	"test compares its table with this one and fails on a difference.\n\n"

// checkCoverage compares the run's table with the committed COVERAGE.md and README block, or writes
// both when asked to.
func checkCoverage(t *testing.T, rows []coverageRow) {
	t.Helper()
	table := coverageTable(rows)
	root := collector.RepoRoot()
	coveragePath := filepath.Join(root, "testbed", "instrumentation", "COVERAGE.md")
	readmePath := filepath.Join(root, "svcspanfilterprocessor", "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatalf("read the svcspanfilter README: %v", err)
	}
	s := string(readme)
	i, j := strings.Index(s, coverageBegin), strings.Index(s, coverageEnd)
	if i < 0 || j < i {
		t.Fatalf("the svcspanfilter README has no coverage markers")
	}
	readmeTable := s[i+len(coverageBegin)+1 : j]

	if *updateCoverage || os.Getenv("SVC_UPDATE_COVERAGE") == "1" {
		if err := os.WriteFile(coveragePath, []byte(coverageHeading+table), 0o644); err != nil {
			t.Errorf("write COVERAGE.md: %v", err)
		}
		if err := os.WriteFile(readmePath, []byte(s[:i+len(coverageBegin)]+"\n"+table+s[j:]), 0o644); err != nil {
			t.Errorf("write the svcspanfilter README: %v", err)
		}
		t.Logf("coverage table written into %s and %s", coveragePath, readmePath)
		return
	}
	committed, err := os.ReadFile(coveragePath)
	if err != nil {
		t.Fatalf("read COVERAGE.md: %v; %s", err, coverageUpdateHint)
	}
	for _, drift := range tableDrift(strings.TrimPrefix(string(committed), coverageHeading), table) {
		t.Errorf("testbed/instrumentation/COVERAGE.md: %s", drift)
	}
	for _, drift := range tableDrift(readmeTable, table) {
		t.Errorf("svcspanfilterprocessor/README.md coverage table: %s", drift)
	}
	if t.Failed() {
		t.Logf("to record this run's coverage table, %s", coverageUpdateHint)
	}
}

// tableDrift says which rows of the committed table differ from the run's, by their first cell.
func tableDrift(committed, run string) []string {
	rowsOf := func(s string) (map[string]string, []string) {
		byKey := map[string]string{}
		var order []string
		for _, line := range strings.Split(s, "\n") {
			if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "|---") {
				continue
			}
			key, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
			if _, dup := byKey[key]; !dup {
				order = append(order, key)
			}
			byKey[key] = line
		}
		return byKey, order
	}
	old, oldOrder := rowsOf(committed)
	cur, curOrder := rowsOf(run)
	var out []string
	for _, k := range curOrder {
		switch o, ok := old[k]; {
		case !ok:
			out = append(out, fmt.Sprintf("row %q is new in this run: %s", k, cur[k]))
		case o != cur[k]:
			out = append(out, fmt.Sprintf("row %q changed:\n  committed: %s\n  this run:  %s", k, o, cur[k]))
		}
	}
	for _, k := range oldOrder {
		if _, ok := cur[k]; !ok {
			out = append(out, fmt.Sprintf("row %q is committed but not in this run", k))
		}
	}
	if len(out) == 0 && strings.TrimSpace(committed) != strings.TrimSpace(run) {
		out = append(out, "the rows are equal but the text around them differs")
	}
	return out
}
