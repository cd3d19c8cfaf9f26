package jsonpos

import (
	"errors"
	"slices"
	"testing"
)

// TestExplain: decoding errors in a user's words, with the path of the
// value at fault.
func TestExplain(t *testing.T) {
	type res struct {
		Cores int64 `json:"cores"`
	}
	type rule struct {
		Command   string            `json:"command"`
		Local     bool              `json:"local_job"`
		Outputs   []string          `json:"outputs"`
		Env       map[string]string `json:"environment"`
		Resources *res              `json:"resources"`
	}
	tests := []struct {
		name, src string
		prefix    []string
		msg       string
		path      []string
	}{
		{"string", `{"command": 3}`, nil, `"command" must be a string, not a number`, []string{"command"}},
		{"whole number", `{"resources": {"cores": 1.5}}`, nil, `"resources.cores" must be a whole number, not 1.5`, []string{"resources", "cores"}},
		{"boolean", `{"local_job": "yes"}`, nil, `"local_job" must be true or false, not a string`, []string{"local_job"}},
		{"list", `{"outputs": {}}`, nil, `"outputs" must be a list, not an object`, []string{"outputs"}},
		{"list item", `{"outputs": ["a", 2]}`, nil, `"outputs[1]" must be a string, not a number`, []string{"outputs", "1"}},
		{"map value", `{"environment": {"A": "a", "B": true}}`, nil, `"environment.B" must be a string, not true or false`, []string{"environment", "B"}},
		{"the whole value", `[1]`, nil, `a rule must be an object, not a list`, nil},
		{"under a prefix", `{"command": 3}`, []string{"rules", "4"}, `"rules[4].command" must be a string, not a number`, []string{"rules", "4", "command"}},
		{"typo", `{"comand": "x"}`, nil, `unknown key "comand" (did you mean "command"?)`, []string{"comand"}},
		{"no near key", `{"zzz": 1}`, nil, `unknown key "zzz" (known: "command", "local_job", "outputs", "environment", "resources")`, []string{"zzz"}},
		// "command" is a key of a rule, not of its resources.
		{"allowed elsewhere", `{"command": "x", "resources": {"command": 1}}`, nil, `"resources": unknown key "command" (known: "cores")`, []string{"resources", "command"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r rule
			err := Explain(Decode([]byte(tt.src), &r), []byte(tt.src), &r, tt.prefix, "a rule")
			var ve *ValueError
			if !errors.As(err, &ve) || ve.Msg != tt.msg || !slices.Equal(ve.Path, tt.path) {
				t.Errorf("Explain = %#v, want %q at %q", err, tt.msg, tt.path)
			}
		})
	}
	// A syntax error is left as it is.
	var r rule
	src := []byte(`{"command": }`)
	if err := Explain(Decode(src, &r), src, &r, nil, "a rule"); err == nil || errors.As(err, new(*ValueError)) {
		t.Errorf("Explain of a syntax error = %v", err)
	}
}

func TestLocate(t *testing.T) {
	src := []byte("{\"a\": [1, {\"b\": \"x\"}]}")
	tests := []struct {
		path []string
		off  int64
		ok   bool
	}{
		{nil, 0, true},
		{[]string{"a"}, 1, true},
		{[]string{"a", "1"}, 10, true},
		{[]string{"a", "1", "b"}, 11, true},
		{[]string{"a", "2"}, 0, false},
	}
	for _, tt := range tests {
		if off, ok := Locate(src, tt.path); off != tt.off || ok != tt.ok {
			t.Errorf("Locate(%q) = %d, %v; want %d, %v", tt.path, off, ok, tt.off, tt.ok)
		}
	}
}
