package masking

import (
	"strings"
	"testing"
)

// builtinCases lists, per builtin rule, text that must be masked whole and text that must be
// left alone. Each positive is checked alone and inside prose.
var builtinCases = map[string]struct {
	positives []string
	negatives []string
}{
	"email": {
		positives: []string{"jane.doe@example.com", "a+tag@sub.example.co.uk", "J_D-1%x@mail-host.io"},
		negatives: []string{
			"@decorator", "user@localhost", "x@y", "jane@example.com4111", "email me at the office", "v1.2.3",
			"550e8400-e29b-41d4-a716-446655440000", "git push origin main", "price @ 5 USD",
		},
	},
	"card_number": {
		positives: []string{
			"4111111111111111", "4111 1111 1111 1111", "4012-8888-8888-1881", "5555555555554444",
			"378282246310005", "6011111111111117", "3530111333300000", "2223003122003222",
		},
		negatives: []string{
			"4111111111111112",         // Luhn fails
			"1700000000000",            // millisecond timestamp
			"2024-01-15T10:30:00.123Z", // timestamp
			"order 1234567890123456",   // no card network prefix
			"550e8400-e29b-41d4-a716-446655440000",
			"d41d8cd98f00b204e9800998ecf8427e",
			"version 4.11.1", "call 415-555-2671", "x4111111111111111", "41111111111",
		},
	},
	"api_key": {
		positives: []string{
			"sk-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3dEf6hIj9kLm2n",
			"sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_Q-7",
			"sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z-AA",
			"AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A",
			"AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
			"ghp_" + strings.Repeat("a1B2", 9), "gho_" + strings.Repeat("Zz09", 10),
			"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv",
			"glpat-Ab3dEf6hIj9kLm2nOp5q", "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOp",
			"xoxp-2222222222-abcdefghij", "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
			"rk_test_51H8abcdEFGH1234ijkl", "pk_live_51H8abcdEFGH1234ijkl",
			"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		},
		negatives: []string{
			"sk-learn-compatible-estimator-pipeline", // hyphenated words, no digits or capitals
			"task-management-system-overview-document",
			"AKIA", "AKIAshort", "ghp_short", "the skills_matrix_document_for_team",
			"550e8400-e29b-41d4-a716-446655440000",
			"d41d8cd98f00b204e9800998ecf8427e0123456789abcdef",
			"eyJhbGciOiJIUzI1NiJ9", "v1.2.3-rc.1", "ASIAN-PACIFIC-REGION-OFFICE",
			"risk-free-investment-strategies-2024",
		},
	},
	"bearer_token": {
		positives: []string{"Bearer abcdefgh12345", "bearer\tXYZ12345678", "BEARER a.b.c_d~e+f/g=="},
		negatives: []string{"the bearer of bad news", "forbearer tokenabcdefgh", "Bearer short", "Bearer:abcdefghijk"},
	},
	"phone": {
		positives: []string{
			"+1 415 555 2671", "+1 (415) 555-2671", "+44 20 7946 0958", "+49 30 901820",
			"+33 1 23 45 67 89", "+14155552671", "+81-3-1234-5678", "+33.1.23.45.67.89",
		},
		negatives: []string{
			"+1", "2024-01-15T10:30:00+01:00", "score +5 points", "+1.5", "1 + 2 = 3",
			"call 415-555-2671", "+100 200", "+0 123 456 789", "UTC+05:30",
			"+1234567890123456789", // more digits than E.164 allows
		},
	},
	"iban": {
		positives: []string{
			"DE89 3704 0044 0532 0130 00", "DE89370400440532013000", "GB82WEST12345698765432",
			"GB82 WEST 1234 5698 7654 32", "FR14 2004 1010 0505 0001 3M02 606",
			"NL91ABNA0417164300", "BE68539007547034", "CH9300762011623852957",
		},
		negatives: []string{
			"DE89 3704 0044 0532 0130 01", // check digits fail
			"DE89370400440532013",         // length not Germany's
			"US12345678901234567890",      // not an IBAN country
			"ISO 8601", "RFC3339", "AB12CDEF12345678", "SKU AB12 3456 7890",
			"ORDER12345678901234", "550e8400-e29b-41d4-a716-446655440000",
		},
	},
}

func TestBuiltinRules(t *testing.T) {
	for name, tc := range builtinCases {
		e, err := New(Config{BuiltinRules: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		repl := builtinRules[name].replacement
		for _, p := range tc.positives {
			want := repl
			if name == "bearer_token" {
				want = p[:6] + " [TOKEN]"
			}
			for _, tmpl := range []string{"%s", "Here it is: %s, thanks.", "(%s)", `{"v":"%s"}`} {
				in := strings.Replace(tmpl, "%s", p, 1)
				wantOut := strings.Replace(tmpl, "%s", want, 1)
				if got, _ := e.String(in); got != wantOut {
					t.Errorf("%s: String(%q) = %q, want %q", name, in, got, wantOut)
				}
			}
		}
		for _, n := range tc.negatives {
			for _, tmpl := range []string{"%s", "We saw %s in the logs."} {
				in := strings.Replace(tmpl, "%s", n, 1)
				if got, changed := e.String(in); changed {
					t.Errorf("%s: negative %q masked: %q", name, in, got)
				}
			}
		}
	}
}

// TestBuiltinRulesLeaveProseAndCode: the whole builtin set changes nothing in text without
// personal data.
func TestBuiltinRulesLeaveProseAndCode(t *testing.T) {
	e, err := New(Config{BuiltinRules: BuiltinRuleNames()})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{
		cleanProse,
		"func (s *Server) Handle(ctx context.Context, req *pb.Request) error { return s.db.Get(ctx, req.Id) }",
		"trace 5b8efff798038103d269b633813fc60c span eee19b7ec3c1b101 at 2024-01-15T10:30:00.123456+02:00",
		"order #A-2024-000123, invoice INV-98765432, sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"Released v2.14.0-rc.3 (build 20240115.1) for linux/amd64; see RFC 9110 section 11.6.2.",
	} {
		if got, changed := e.String(text); changed {
			t.Errorf("clean text masked:\n in: %q\nout: %q", text, got)
		}
	}
}

func TestLuhnAndIBANChecks(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fn   func(string) bool
		want bool
	}{
		{"4111 1111 1111 1111", luhnValid, true},
		{"4111 1111 1111 1112", luhnValid, false},
		{"411111111111", luhnValid, false}, // too short
		{"DE89 3704 0044 0532 0130 00", ibanValid, true},
		{"DE88 3704 0044 0532 0130 00", ibanValid, false},
		{"XX89 3704 0044 0532 0130 00", ibanValid, false},
		{"GB82WEST12345698765432", ibanValid, true},
		{"GB82west12345698765432", ibanValid, false},
	} {
		if got := tc.fn(tc.in); got != tc.want {
			t.Errorf("check(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
