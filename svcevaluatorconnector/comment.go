package svcevaluatorconnector

import (
	"fmt"
	"strconv"
	"strings"
)

// commentPlaceholders are what a comment template may name, as {{placeholder}}. None of them
// is content (input, output, metadata): a comment never carries what masking should see.
var commentPlaceholders = []string{"evaluator", "name", "type", "model", "measure", "value", "threshold"}

// commentPart is a literal text, or a placeholder when field is set.
type commentPart struct {
	text  string
	field string
}

type commentTemplate []commentPart

// parseComment compiles a comment template; an unknown or unclosed placeholder is an error.
func parseComment(text string) (commentTemplate, error) {
	var parts commentTemplate
	for text != "" {
		start := strings.Index(text, "{{")
		if start < 0 {
			parts = append(parts, commentPart{text: text})
			break
		}
		if start > 0 {
			parts = append(parts, commentPart{text: text[:start]})
		}
		end := strings.Index(text[start:], "}}")
		if end < 0 {
			return nil, fmt.Errorf("unclosed {{ in %q", text)
		}
		field := strings.TrimSpace(text[start+2 : start+end])
		if !contains(commentPlaceholders, field) {
			return nil, fmt.Errorf("unknown placeholder {{%s}} (one of {{%s}})", field, strings.Join(commentPlaceholders, "}}, {{"))
		}
		parts = append(parts, commentPart{field: field})
		text = text[start+end+2:]
	}
	return parts, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// commentValues are the values of one evaluation.
type commentValues struct {
	evaluator, name, typ, model string
	measure, value              float64
	hasMeasure                  bool
	threshold                   string
}

// uses reports whether the template names the placeholder.
func (t commentTemplate) uses(field string) bool {
	for _, p := range t {
		if p.field == field {
			return true
		}
	}
	return false
}

func (t commentTemplate) render(v commentValues) string {
	if len(t) == 0 {
		return ""
	}
	var b strings.Builder
	for _, p := range t {
		switch p.field {
		case "":
			b.WriteString(p.text)
		case "evaluator":
			b.WriteString(v.evaluator)
		case "name":
			b.WriteString(v.name)
		case "type":
			b.WriteString(v.typ)
		case "model":
			b.WriteString(v.model)
		case "measure":
			if v.hasMeasure {
				b.WriteString(strconv.FormatFloat(v.measure, 'g', -1, 64))
			}
		case "value":
			b.WriteString(strconv.FormatFloat(v.value, 'g', -1, 64))
		case "threshold":
			b.WriteString(v.threshold)
		}
	}
	return b.String()
}
