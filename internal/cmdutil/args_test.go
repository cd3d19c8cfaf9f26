package cmdutil

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestClassifyArgs: each argument is what pflag's parser takes it for.
func TestClassifyArgs(t *testing.T) {
	flags := pflag.NewFlagSet("tool", pflag.ContinueOnError)
	flags.StringP("log", "l", "", "")
	flags.IntP("jobs", "j", 0, "")
	flags.BoolP("quiet", "q", false, "")
	flags.StringP("clean", "c", "", "")
	flags.Lookup("clean").NoOptDefVal = "all"
	const (
		F = ArgFlag
		V = ArgFlagValue
		P = ArgPositional
		T = ArgTerminator
	)
	tests := []struct {
		args []string
		want []ArgKind
	}{
		{[]string{"wf.mf"}, []ArgKind{P}},
		{[]string{"-j", "8", "wf.mf"}, []ArgKind{F, V, P}},
		{[]string{"-j8", "wf.mf"}, []ArgKind{F, P}},
		{[]string{"-j=8", "wf.mf"}, []ArgKind{F, P}},
		{[]string{"--jobs", "8", "wf.mf"}, []ArgKind{F, V, P}},
		{[]string{"--jobs=8", "wf.mf"}, []ArgKind{F, P}},
		{[]string{"-qj", "8", "wf.mf"}, []ArgKind{F, V, P}},
		{[]string{"-jq", "wf.mf"}, []ArgKind{F, P}}, // "q" is -j's value
		{[]string{"-q", "wf.mf"}, []ArgKind{F, P}},
		{[]string{"-c", "wf.mf"}, []ArgKind{F, P}}, // a value only with "="
		{[]string{"-l", "--quiet", "wf.mf"}, []ArgKind{F, V, P}},
		{[]string{"--log", "-", "-"}, []ArgKind{F, V, P}},
		{[]string{"--", "-q", "--log"}, []ArgKind{T, P, P}},
		{[]string{"--unknown", "wf.mf"}, []ArgKind{F, P}},
		{[]string{"-l"}, []ArgKind{F}},
	}
	for _, tt := range tests {
		if got := ClassifyArgs(flags, tt.args); !slices.Equal(got, tt.want) {
			t.Errorf("ClassifyArgs(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}
