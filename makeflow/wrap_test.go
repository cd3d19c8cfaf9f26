package makeflow

import (
	"reflect"
	"testing"
)

func TestWrap(t *testing.T) {
	tests := []struct {
		wrappers []Wrapper
		command  string
		sources  []string
		targets  []string
	}{
		{[]Wrapper{{Command: "nice"}}, "nice /bin/sh -c 'echo \"a b\" > out'", nil, []string{"out"}},
		{[]Wrapper{{Command: "time -p {}"}}, "time -p echo \"a b\" > out", nil, []string{"out"}},
		{[]Wrapper{{Command: "./w.sh /bin/sh -c []"}, {Command: "{} ; echo done > log.%%"}},
			"./w.sh /bin/sh -c 'echo \"a b\" > out' ; echo done > log.3", nil, []string{"out"}},
		{[]Wrapper{{Command: "./w.sh {}", Inputs: []string{"w.sh"}, Outputs: []string{"w.%%.log"}}},
			"./w.sh echo \"a b\" > out", []string{"w.sh"}, []string{"out", "w.3.log"}},
	}
	for _, tt := range tests {
		w := &Workflow{Rules: []*Rule{{ID: 3, Command: `echo "a b" > out`, Targets: []File{{Name: "out"}}}}}
		w.Wrap(tt.wrappers...)
		r := w.Rules[0]
		var sources, targets []string
		for _, f := range r.Sources {
			sources = append(sources, f.Name)
		}
		for _, f := range r.Targets {
			targets = append(targets, f.Name)
		}
		if r.Command != tt.command || !reflect.DeepEqual(sources, tt.sources) || !reflect.DeepEqual(targets, tt.targets) {
			t.Errorf("%+v: command %q, sources %q, targets %q; want %q, %q, %q", tt.wrappers, r.Command, sources, targets, tt.command, tt.sources, tt.targets)
		}
	}
}
