package lang

import "testing"

// TestFormatEdges covers inputs the goldens do not: empty files, CRLF,
// tabs, comments without a final newline, deep nesting, long inline blocks.
func TestFormatEdges(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"only newlines", "\n\n\n", ""},
		{"only comments", "# a\n\n\n// b", "# a\n\n// b\n"},
		{"crlf", "route r {\r\n  from file { path = \"a\" }\r\n  to file { path = \"b\" } # c\r\n}\r\n", "route r {\n  from file { path = \"a\" }\n  to file { path = \"b\" }  # c\n}\n"},
		{"tabs", "route r {\n\tfrom file {\n\t\tpath\t=\t\"a\"\n\t}\n}\n", "route r {\n  from file {\n    path = \"a\"\n  }\n}\n"},
		{"empty route", "route r {}\nroute s {\n\n}\n", "route r {}\n\nroute s {}\n"},
		{"too long inline", "route r {\n  to sql { url = \"sqlite://a-rather-long-database-name.db\", table = \"a_rather_long_table_name\", create_table = \"x\" }\n}\n",
			"route r {\n  to sql {\n    url          = \"sqlite://a-rather-long-database-name.db\"\n    table        = \"a_rather_long_table_name\"\n    create_table = \"x\"\n  }\n}\n"},
		{"blank lines collapse", "route r {\n\n\n  a = 1\n\n\n\n  b = 2\n\n}\n", "route r {\n  a = 1\n\n  b = 2\n}\n"},
		{"run broken by blank", "route r {\n  a = 1\n  long_key = 2\n\n  bb = 3\n}\n", "route r {\n  a        = 1\n  long_key = 2\n\n  bb = 3\n}\n"},
		{"bare and ref", "output o = http { url = \"u\" }\nroute r { from file {path=\"a\"}\n keep\n to ref o }\n", "output o = http { url = \"u\" }\n\nroute r {\n  from file { path = \"a\" }\n  keep\n  to ref o\n}\n"},
		// A bare key keeps its comma where the next line would continue it.
		{"bare before ref", "route r {\n  a, ref b\n}\n", "route r {\n  a,\n  ref b\n}\n"},
		{"bare before block", "route r {\n  a, b {}\n}\n", "route r {\n  a,\n  b {}\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, diags := Format("t.mqb", []byte(tt.in))
			if diags.HasErrors() {
				t.Fatalf("diags: %v", diags)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			checkFormat(t, "t.mqb", []byte(tt.in))
		})
	}
}
