package makeflow

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ruleView is the part of a parsed rule a test compares.
type ruleView struct {
	targets, sources []string // "name" or "name->remote"
	command          string
	local            bool
	category         string
	env              []string // only the NAME=value pairs asked for in envKeys
}

func viewFiles(files []File) []string {
	var out []string
	for _, f := range files {
		if f.Remote != "" {
			out = append(out, f.Name+"->"+f.Remote)
		} else {
			out = append(out, f.Name)
		}
	}
	return out
}

func envOf(env []string, keys []string) []string {
	var out []string
	for _, k := range keys {
		for _, kv := range env {
			if strings.HasPrefix(kv, k+"=") {
				out = append(out, kv)
			}
		}
	}
	return out
}

// numbered returns "prefixFROM ... prefixTO".
func numbered(prefix string, from, to int) string {
	var names []string
	for i := from; i <= to; i++ {
		names = append(names, fmt.Sprintf("%s%d", prefix, i))
	}
	return strings.Join(names, " ")
}

func TestParseRules(t *testing.T) {
	environ := []string{"HOME=/home/u", "FROM_ENV=env value"}
	tests := []struct {
		name    string
		src     string
		envKeys []string
		want    []ruleView
	}{
		{
			name: "rule with tab command",
			src:  "out.txt: in.txt\n\tcat in.txt > out.txt\n",
			want: []ruleView{{targets: []string{"out.txt"}, sources: []string{"in.txt"}, command: "cat in.txt > out.txt"}},
		},
		{
			name: "spaces indent a command too",
			src:  "a:\n    echo a > a\n",
			want: []ruleView{{targets: []string{"a"}, command: "echo a > a"}},
		},
		{
			name: "several targets and sources, no sources",
			src:  "x y z :\n\ttouch x y z\nw: x  y\tz\n\tcat x y z > w\n",
			want: []ruleView{
				{targets: []string{"x", "y", "z"}, command: "touch x y z"},
				{targets: []string{"w"}, sources: []string{"x", "y", "z"}, command: "cat x y z > w"},
			},
		},
		{
			name: "variables in all three forms",
			src:  "A=1\nB = two words\nC=${A}-$(B)\nout_$A: in_${A}\n\techo $A $(B) ${C} > out_$A\n",
			want: []ruleView{{targets: []string{"out_1"}, sources: []string{"in_1"}, command: "echo 1 two words 1-two words > out_1"}},
		},
		{
			name: "append with +=",
			src:  "L=a\nL+=b\nL += c\nM+=first\nout:\n\techo $L / $M > out\n",
			want: []ruleView{{targets: []string{"out"}, command: "echo a b c / first > out"}},
		},
		{
			name: "rule-local variables (CCTools variable_scope.makeflow)",
			src: "VAR1 = 1 # Global\nout.0:\n\t@VAR1=0\n\techo ${VAR1} > out.0 # Should display 0\n\n" +
				"out.1:\n\techo ${VAR1} > out.1\n\nout.2:\n\t@VAR1+=2\n\techo ${VAR1} > out.2\n\n" +
				"out.3:\n\t@VAR2+=0\n\techo ${VAR2} > out.3\n\nout.4:\n\t@VAR2+=1\n\techo ${VAR2} > out.4\n" +
				"out.5:\nVAR1=5\n\techo $VAR1 > out.5\n",
			want: []ruleView{
				{targets: []string{"out.0"}, command: "echo 0 > out.0"},
				{targets: []string{"out.1"}, command: "echo 1 > out.1"},
				{targets: []string{"out.2"}, command: "echo 1 2 > out.2"},
				{targets: []string{"out.3"}, command: "echo 0 > out.3"},
				{targets: []string{"out.4"}, command: "echo 1 > out.4"},
				{targets: []string{"out.5"}, command: "echo 5 > out.5"},
			},
		},
		{
			name: "only exported variables reach the environment",
			src: "VAR0=0\nVAR1=1\nexport VAR1\nexport X=\"a b\" HOME\nout.0:\n\techo \\$VAR0 > out.0\n" +
				"out.2:\nVAR1=2\n\techo \\$VAR1 > out.2\n",
			envKeys: []string{"VAR0", "VAR1", "X", "HOME"},
			want: []ruleView{
				// "export X=..." assigns X the rest of the line, quotes kept,
				// as CCTools does; HOME is not exported by that line.
				{targets: []string{"out.0"}, command: "echo $VAR0 > out.0", env: []string{"VAR1=1", `X="a b" HOME`}},
				{targets: []string{"out.2"}, command: "echo $VAR1 > out.2", env: []string{"VAR1=2", `X="a b" HOME`}},
			},
		},
		{
			name:    "export of environment variables and lists",
			src:     "export FROM_ENV HOME\nY=y\nexport Y\nout:\n\ttrue\n",
			envKeys: []string{"FROM_ENV", "HOME", "Y"},
			want:    []ruleView{{targets: []string{"out"}, command: "true", env: []string{"FROM_ENV=env value", "HOME=/home/u", "Y=y"}}},
		},
		{
			name: "rule-local override of an exported variable",
			src:  "export T=4\na:\n\tt=$$T; echo $$t > a\nb:\nT=8\n\techo $$T > b\n",
			// The environment of rule b carries the override.
			envKeys: []string{"T"},
			want: []ruleView{
				{targets: []string{"a"}, command: "t=$T; echo $t > a", env: []string{"T=4"}},
				{targets: []string{"b"}, command: "echo $T > b", env: []string{"T=8"}},
			},
		},
		{
			name:    "environment variables as workflow variables",
			src:     "out:\n\techo $HOME $(FROM_ENV) > out\n",
			envKeys: []string{"HOME"},
			want:    []ruleView{{targets: []string{"out"}, command: "echo /home/u env value > out"}},
		},
		{
			name: "categories and category variables",
			src: ".MAKEFLOW CATEGORY one\nX=in-one\na:\n\techo ${CATEGORY} $X > a\n" +
				".MAKEFLOW CATEGORY two\nb:\n\techo \\${CATEGORY} > b\nCATEGORY=three\nc:\n\techo $CATEGORY > c\n",
			envKeys: []string{"CATEGORY"},
			want: []ruleView{
				{targets: []string{"a"}, command: "echo one in-one > a", category: "one", env: []string{"CATEGORY=one"}},
				{targets: []string{"b"}, command: "echo ${CATEGORY} > b", category: "two", env: []string{"CATEGORY=two"}},
				{targets: []string{"c"}, command: "echo three > c", category: "three", env: []string{"CATEGORY=three"}},
			},
		},
		{
			name: "a category's variables are its own",
			src:  "X=global\n.MAKEFLOW CATEGORY one\nX=one\na:\n\techo $X > a\n.MAKEFLOW CATEGORY two\nb:\n\techo $X > b\n",
			want: []ruleView{
				{targets: []string{"a"}, command: "echo one > a", category: "one"},
				{targets: []string{"b"}, command: "echo global > b", category: "two"},
			},
		},
		{
			name: "LOCAL, BATCH_LOCAL and redirections before the command",
			src: "correct.makeflow: typo.makeflow\n\tLOCAL < typo.makeflow > correct.makeflow sed \"s!capital!capitol!g\"\n" +
				"b:\nBATCH_LOCAL=true\n\ttouch b\nc:\n\ttouch c\n",
			want: []ruleView{
				{targets: []string{"correct.makeflow"}, sources: []string{"typo.makeflow"}, local: true,
					command: `< typo.makeflow > correct.makeflow sed "s!capital!capitol!g"`},
				{targets: []string{"b"}, command: "touch b", local: true},
				{targets: []string{"c"}, command: "touch c"},
			},
		},
		{
			name: "remote renaming",
			src:  "out.1 -> out.txt: input.txt->input.1 plain\n\tcat input.1 > out.txt\n",
			want: []ruleView{{targets: []string{"out.1->out.txt"}, sources: []string{"input.txt->input.1", "plain"}, command: "cat input.1 > out.txt"}},
		},
		{
			name: "dashes in file names are not renaming",
			src:  "a-b: ab\n\tcat ab > a-b\na--b: a-b\n\tcat a-b > a--b\na----b: a--b\n\tcat a--b > a----b\nx-->y: -lead\n\ttrue\n",
			want: []ruleView{
				{targets: []string{"a-b"}, sources: []string{"ab"}, command: "cat ab > a-b"},
				{targets: []string{"a--b"}, sources: []string{"a-b"}, command: "cat a-b > a--b"},
				{targets: []string{"a----b"}, sources: []string{"a--b"}, command: "cat a--b > a----b"},
				{targets: []string{"x-->y"}, sources: []string{"-lead"}, command: "true"},
			},
		},
		{
			name: "quoted names with spaces, and lists from variables (CCTools quotes.01)",
			src: "\"A\":\n\t/bin/echo A > A\n'B':\n\t/bin/echo B > B\nVAR_CD=C D\n$(VAR_CD) E:\n\ttrue\n" +
				"F \"$(VAR_CD)\" G:\n\t/bin/echo \"$(VAR_CD) \\'$(VAR_CD)\\' \\\\\\\"$(VAR_CD)\\\\\\\"\" > \"$(VAR_CD)\"\n" +
				"VAR_HK=\"H I\" \"J K\"\n$(VAR_HK):\n    /bin/echo H I > \"H I\"\n" +
				"x$(VAR_CD)y:\n\ttrue\n" +
				"3space\\ .txt:\n\ttrue\n",
			want: []ruleView{
				{targets: []string{"A"}, command: "/bin/echo A > A"},
				{targets: []string{"B"}, command: "/bin/echo B > B"},
				{targets: []string{"C", "D", "E"}, command: "true"},
				{targets: []string{"F", "C D", "G"}, command: `/bin/echo "C D 'C D' \"C D\"" > "C D"`},
				{targets: []string{"H I", "J K"}, command: `/bin/echo H I > "H I"`},
				{targets: []string{"xC", "Dy"}, command: "true"},
				{targets: []string{"3space .txt"}, command: "true"},
			},
		},
		{
			name: "dollars, escapes and comments (CCTools export.makeflow)",
			src: "o3:\n\techo \\$ > o3\t    # Display $\no4:\n\techo \\\\\\$ > o4\no5:\n\techo $$HOME '$HOME' \"$$x\" > o5\n" +
				"o6:\n\techo \"# kept\" '# kept' \\# a#b # dropped\no7:\n\tprintf \"a\\tb\\n\" 'c\\.d' e\\.f\n",
			want: []ruleView{
				{targets: []string{"o3"}, command: "echo $ > o3"},
				{targets: []string{"o4"}, command: `echo \$ > o4`},
				{targets: []string{"o5"}, command: `echo $HOME '$HOME' "$x" > o5`},
				{targets: []string{"o6"}, command: `echo "# kept" '# kept' # a`},
				{targets: []string{"o7"}, command: "printf \"a\tb\n\" 'c.d' e.f"},
			},
		},
		{
			name: "variable values keep their quotes and are read again in commands",
			src:  "Y='c d'\nZ=\"e  f\"\nout:\n\techo $Y \"$Y\" $Z   x > out\n",
			want: []ruleView{{targets: []string{"out"}, command: `echo 'c d' "'c d'" "e  f" x > out`}},
		},
		{
			name: "line continuation (CCTools line_continuation.makeflow)",
			src: "\nMAKEFLOW_INPUTS=\nMAKEFLOW_OUTPUTS=out2\n\nout1:\n\techo \"One\" \"Two\" \\\n    \"Three\" > out1\n\n\n" +
				"out2: out1\n\tgrep \"One Two Three\" out1 > out2 \\\n\nout3: out1 \\\n  out2\n\tcat out1 out2 > out3\n",
			want: []ruleView{
				{targets: []string{"out1"}, command: `echo "One" "Two" "Three" > out1`},
				{targets: []string{"out2"}, sources: []string{"out1"}, command: `grep "One Two Three" out1 > out2`},
				{targets: []string{"out3"}, sources: []string{"out1", "out2"}, command: "cat out1 out2 > out3"},
			},
		},
		{
			name: "comments and blank lines everywhere",
			src:  "# header\n\n   \nX=1 # trailing\n# between\nout: # no sources\n# between rule and command\n\n\techo \"$X\" > out # done\n\t# an indented comment\n",
			want: []ruleView{{targets: []string{"out"}, command: `echo "1" > out`}},
		},
		{
			name: "file names are cleaned",
			src:  "./a//b/: ./c\n\ttrue\n",
			want: []ruleView{{targets: []string{"a/b"}, sources: []string{"c"}, command: "true"}},
		},
		{
			// Long lists keep a set of names (fileList): repeats before and
			// after it is made, and a following short rule, are kept right.
			name: "a file named twice in a list is kept once, short or long",
			src: "t t: s s ./s\n\ttrue\ngather: " + numbered("f", 1, 20) + " f3 ./f20 " + numbered("f", 15, 25) + " f1\n\ttrue\n" +
				"x: f1 f1\n\ttrue\n",
			want: []ruleView{
				{targets: []string{"t"}, sources: []string{"s"}, command: "true"},
				{targets: []string{"gather"}, sources: strings.Fields(numbered("f", 1, 25)), command: "true"},
				{targets: []string{"x"}, sources: []string{"f1"}, command: "true"},
			},
		},
		{
			name: "Windows line endings",
			src:  "X=1\r\nout:\r\n\techo $X > out\r\n",
			want: []ruleView{{targets: []string{"out"}, command: "echo 1 > out"}},
		},
		{
			name: "dotted target names are not directives",
			src:  ".done: .MAKEFLOW.x\n\ttouch .done\n",
			want: []ruleView{{targets: []string{".done"}, sources: []string{".MAKEFLOW.x"}, command: "touch .done"}},
		},
		{
			name: "a colon inside a command or a value is plain text",
			src:  "URL=http://example.org/x\nout:\n\techo $(URL) a:b > out\n",
			want: []ruleView{{targets: []string{"out"}, command: "echo http://example.org/x a:b > out"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Parse("t.mf", []byte(tt.src), environ)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(w.Rules) != len(tt.want) {
				t.Fatalf("got %d rules, want %d", len(w.Rules), len(tt.want))
			}
			for i, r := range w.Rules {
				want := tt.want[i]
				if want.category == "" {
					want.category = "default"
				}
				got := ruleView{targets: viewFiles(r.Targets), sources: viewFiles(r.Sources), command: r.Command,
					local: r.Local, category: r.Category, env: envOf(r.Env, tt.envKeys)}
				if !slices.Equal(got.targets, want.targets) || !slices.Equal(got.sources, want.sources) ||
					got.command != want.command || got.local != want.local || got.category != want.category ||
					(tt.envKeys != nil && want.env != nil && !slices.Equal(got.env, want.env)) {
					t.Errorf("rule %d:\n got %#v\nwant %#v", i, got, want)
				}
				if r.ID != i {
					t.Errorf("rule %d has ID %d", i, r.ID)
				}
			}
		})
	}
}

func TestParseResourcesAndEnvironment(t *testing.T) {
	src := `.MAKEFLOW CATEGORY big
.MAKEFLOW CORES 4
.MAKEFLOW MEMORY 2G
.MAKEFLOW DISK 500
GPUS=1
WALL_TIME=2h
a:
	true
.MAKEFLOW CATEGORY small
b:
MEMORY=100
.MAKEFLOW CORES 2
	true
.MAKEFLOW CATEGORY plain
c:
	true
d:
OMP_NUM_THREADS=3
	true
.SIZE a 10M
.SIZE "b c" 12
.MAKEFLOW MODE MAX_THROUGHPUT
`
	w, err := Parse("r.mf", []byte(src), []string{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Resources{
		{Cores: 4, MemoryMB: 2048, DiskMB: 500, GPUs: 1, WallTimeS: 7200},
		{Cores: 2, MemoryMB: 100},
		{},
		{},
	}
	wantEnv := [][]string{
		{"OMP_NUM_THREADS=4", "CATEGORY=big", "CORES=4", "MEMORY=2G", "DISK=500", "GPUS=1", "WALL_TIME=2h"},
		{"OMP_NUM_THREADS=2", "CATEGORY=small", "CORES=2", "MEMORY=100"},
		{"OMP_NUM_THREADS=1", "CORES=1", "CATEGORY=plain"},
		{"CORES=3", "CATEGORY=plain"},
	}
	for i, r := range w.Rules {
		if r.Resources != want[i] {
			t.Errorf("rule %d resources = %+v, want %+v", i, r.Resources, want[i])
		}
		if !slices.Equal(r.Env, wantEnv[i]) {
			t.Errorf("rule %d env = %q, want %q", i, r.Env, wantEnv[i])
		}
	}
	if w.Sizes["a"] != 10<<20 || w.Sizes["b c"] != 12 {
		t.Errorf("sizes = %v", w.Sizes)
	}
	if &w.Rules[2].Env[0] == &w.Rules[3].Env[0] {
		t.Error("different environments share a slice")
	}
}

func TestParseSharesEqualEnvironments(t *testing.T) {
	w, err := Parse("s.mf", []byte("export A=1\na:\n\ttrue\nb:\n\ttrue\n"), []string{})
	if err != nil {
		t.Fatal(err)
	}
	if &w.Rules[0].Env[0] != &w.Rules[1].Env[0] {
		t.Error("equal environments are not shared; the local executor would rebuild them per rule")
	}
}

func TestParseInputsOutputsAndNested(t *testing.T) {
	src := "MAKEFLOW_INPUTS=in/hello \"x y\" \"\"\nMAKEFLOW_OUTPUTS=\"out.all\"\nout.all: sub.mf in/hello\n\tMAKEFLOW sub.mf subdir\nlocal.out:\n\tLOCAL MAKEFLOW other.mf\n"
	w, err := Parse("n.mf", []byte(src), []string{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.Inputs, []string{"in/hello", "x y"}) || !slices.Equal(w.Outputs, []string{"out.all"}) {
		t.Errorf("inputs %q outputs %q", w.Inputs, w.Outputs)
	}
	r := w.Rules[0]
	if r.Nested == nil || r.Nested.File != "sub.mf" || r.Nested.Dir != "subdir" || r.Command != "" {
		t.Errorf("nested rule = %+v (nested %+v)", r, r.Nested)
	}
	r = w.Rules[1]
	if r.Nested == nil || r.Nested.File != "other.mf" || !r.Local || !slices.Equal(viewFiles(r.Sources), []string{"other.mf"}) {
		t.Errorf("nested rule = %+v (nested %+v)", r, r.Nested)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // each error, as file:line:col: message prefix
	}{
		{"undefined variable in a command", "out:\n\techo $1 > out\n", []string{"e.mf:2:7: variable 1 is not defined (write \\$1 or $$1"}},
		{"undefined variable in a rule line", "out: $(NOPE)\n\ttrue\n", []string{"e.mf:1:6: variable NOPE is not defined"}},
		{"assignment without a name", "=bad\n", []string{"e.mf:1:1: assignment without a variable name"}},
		{"unknown operator", "X-=1\n", []string{`e.mf:1:2: unknown operator "-=" after X`}},
		{"unknown operator after a name", "X != 1\n", []string{`e.mf:1:3: unknown operator "!=" after X`}},
		{"not an assignment", "@X 1\n", []string{"e.mf:1:4: expected '=' or '+=' after X"}},
		{"unknown .MAKEFLOW directive", ".MAKEFLOW NOT_DIRECTIVE 1\n", []string{`e.mf:1:11: unknown .MAKEFLOW directive "NOT_DIRECTIVE"`}},
		{"unknown directive", ".RESOURCE CORES 1\n", []string{`e.mf:1:1: unknown directive ".RESOURCE"`}},
		{"non-numeric cores", ".MAKEFLOW CORES many\n", []string{`e.mf:1:17: CORES must be a whole number, got "many"`}},
		{"bad memory", "MEMORY=lots\n", []string{`e.mf:1:8: MEMORY must be a size in MB`}},
		{"negative disk", "a:\nDISK=-1\n\ttrue\n", []string{`e.mf:2:6: DISK must be a size in MB`}},
		{"bad size", ".SIZE f big\n", []string{`e.mf:1:9: .SIZE f: size must be a number of bytes`}},
		{"bad mode", ".MAKEFLOW MODE FAST\n", []string{`e.mf:1:16: unknown .MAKEFLOW MODE "FAST"`}},
		{"unbalanced double quote in a rule", "\"A:\n\ttrue\n", []string{"e.mf:1:1: unterminated \" quote"}},
		{"unbalanced single quote in a rule", "'A:\n\ttrue\n", []string{"e.mf:1:1: unterminated ' quote"}},
		{"unbalanced quote in a command", "a:\n\techo 'oops > a\n", []string{"e.mf:2:7: unterminated ' quote"}},
		{"rule without a command at the end", "a: b\n", []string{"e.mf:1:1: rule has no command"}},
		{"rule without a command before the next", "a:\nb:\n\ttrue\n", []string{"e.mf:1:1: rule has no command"}},
		{"two command lines", "a:\n\ttouch a\n\techo again\n", []string{"e.mf:3:2: rule at line 1 already has a command"}},
		{"command outside a rule", "\techo hi\n", []string{"e.mf:1:2: command line outside a rule"}},
		{"garbage line", "just words\n", []string{"e.mf:1:1: expected a rule"}},
		{"lone dollar", "a:\n\techo $ > a\n", []string{"e.mf:2:7: '$' must be followed by a variable name"}},
		{"unclosed substitution", "X=1\na:\n\techo $(X > a\n", []string{"e.mf:3:10: missing ')' to close $(X"}},
		{"self-referential variable", "X=\\$X\na:\n\techo $X\n", []string{"e.mf:3:7: variables substituted more than 32 levels deep"}},
		{"exploding variable", "X=x\n" + strings.Repeat("X+=$X\n", 24), []string{"e.mf:25:4: the value of X is longer than 16 MB"}},
		{"exploding command", explodingCommand(), []string{"e.mf:10:7: command longer than 16 MB, or made of more than"}},
		{"self-referential pair", "Y=\\$Z\\$Z\nZ=\\$Y\\$Y\na:\n\techo $Y\n", []string{"e.mf:4:7: variables substituted more than 32 levels deep"}},
		{"arrow without a remote name", "a ->: b\n\ttrue\n", []string{"e.mf:1:3: '->' must be followed by the file's remote name"}},
		{"arrow without a local name", "-> a: b\n\ttrue\n", []string{"e.mf:1:1: '->' must stand between"}},
		{"absolute remote name", "a -> /abs: b\n\ttrue\n", []string{"e.mf:1:1: remote name \"/abs\" must be a relative path"}},
		{"two colons", "a: b: c\n\ttrue\n", []string{"e.mf:1:5: second ':' in a rule line"}},
		{"empty quoted name", "'': b\n\ttrue\n", []string{"e.mf:1:1: empty file name"}},
		{"export inside a rule", "a:\nexport X=1\n\ttrue\n", []string{"e.mf:1:1: export between a rule and its command"}},
		{"empty command", "a:\n\tLOCAL\n", []string{"e.mf:2:2: empty command"}},
		{"nul byte", "a:\n\ttrue\x00\n", []string{"e.mf:2: file contains a NUL byte"}},
		{"several errors, all reported in order", "a:\n\techo $U1\nb:\n\techo $U2\n.MAKEFLOW CORES x\n", []string{
			"e.mf:2:7: variable U1", "e.mf:4:7: variable U2", "e.mf:5:17: CORES must be"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("e.mf", []byte(tt.src), []string{})
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Parse error = %v, want an ErrorList", err)
			}
			if len(list) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(list), len(tt.want), err)
			}
			for i, e := range list {
				if !strings.HasPrefix(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, e.Error(), tt.want[i])
				}
			}
		})
	}
}

func TestParseResourceValues(t *testing.T) {
	tests := []struct {
		name, text string
		want       int64
		ok         bool
	}{
		{"CORES", "4", 4, true},
		{"CORES", "1.5", 0, false},
		{"CORES", "-2", 0, false},
		{"MEMORY", "512", 512, true},
		{"MEMORY", "4G", 4096, true},
		{"MEMORY", "4gb", 4096, true},
		{"MEMORY", "1T", 1 << 20, true},
		{"DISK", "12M", 12, true},
		{"DISK", "12K", 0, false},
		{"WALL_TIME", "90", 90, true},
		{"WALL_TIME", "2m", 120, true},
		{"WALL_TIME", "1d", 86400, true},
		{"GPUS", "\"2\"", 2, true},
		{"GPUS", "", 0, false},
	}
	for _, tt := range tests {
		got, err := parseResource(tt.name, tt.text)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseResource(%s, %q) = %d, %v; want %d, ok=%v", tt.name, tt.text, got, err, tt.want, tt.ok)
		}
	}
}

// FuzzParse feeds the parser arbitrary text: it must never panic, and what
// it accepts must be a well-formed workflow.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"a: b\n\tcat b > a\n",
		"X=1\nexport X\na b: c->d 'e f' \"$X\"\n\techo $$X \\$X '$X' \"${X}\" # c\n",
		".MAKEFLOW CATEGORY c\n.MAKEFLOW CORES 2\n.SIZE a 1K\nMAKEFLOW_OUTPUTS=a\na:\n\t@V+=1\n\tLOCAL MAKEFLOW sub.mf dir\n",
		"a:\\\n b\n\tx \\\n y\n",
		"\"unterminated\n", "$(", "a:\n\t$", "=", "\t", "@.", "x->:y",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		w, err := Parse("f.mf", []byte(src), []string{"HOME=/h"})
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v is not a non-empty ErrorList", err)
			}
			for _, e := range list {
				if e.Pos.Line < 1 {
					t.Fatalf("error without a line: %v", e)
				}
			}
			return
		}
		for i, r := range w.Rules {
			if r.ID != i || (r.Command == "" && r.Nested == nil) {
				t.Fatalf("rule %d malformed: %+v", i, r)
			}
			for _, f := range append(append([]File(nil), r.Targets...), r.Sources...) {
				if f.Name == "" {
					t.Fatalf("rule %d has an empty file name", i)
				}
			}
		}
		w.Check(nil)
	})
}

// FuzzParseJSON does the same for the JSON form.
func FuzzParseJSON(f *testing.F) {
	for _, seed := range []string{
		`{"rules": [{"command": "x", "outputs": ["a"], "inputs": [{"dag_name": "b", "task_name": "c"}]}]}`,
		`{"environment": {"A": "1"}, "categories": {"c": {"resources": {"cores": 2}}}, "rules": []}`,
		`{"rules": [{"makeflow": {"path": "s.json"}}]}`, `[`, `{"rules": 3}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		w, err := ParseJSON("f.json", []byte(src))
		if err == nil {
			w.Check(nil)
		}
	})
}

// explodingCommand is a workflow whose command expands to 10^8 words: V1
// holds ten references to V2, which holds ten to V3, and so on.
func explodingCommand() string {
	var b strings.Builder
	for i := 1; i <= 7; i++ {
		fmt.Fprintf(&b, "V%d=%s\n", i, strings.Repeat(fmt.Sprintf("\\$V%d ", i+1), 10))
	}
	b.WriteString("V8=x\na:\n\techo $V1\n")
	return b.String()
}

// BenchmarkParseFlat parses the flat workflow of bench/makeflow_bench.sh:
// n one-line rules and one rule gathering their n outputs.
func BenchmarkParseFlat(b *testing.B) {
	for _, n := range []int{2000, 50000} {
		var src strings.Builder
		for i := range n {
			fmt.Fprintf(&src, "out_%d:\n\techo %d > out_%d\n", i, i, i)
		}
		src.WriteString("gather:")
		for i := range n {
			fmt.Fprintf(&src, " out_%d", i)
		}
		src.WriteString("\n\tcat out_* > gather\n")
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse("flat.mf", []byte(src.String()), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReadWorkflowErrors: a workflow file that cannot be read is named
// as given, with what is wrong and not the system call, in every form.
func TestReadWorkflowErrors(t *testing.T) {
	dir := t.TempDir()
	parsers := map[string]func(string) error{
		"Makeflow": func(p string) error { _, err := ParseFile(p, nil); return err },
		"JSON":     func(p string) error { _, err := ParseJSONFile(p); return err },
		"JX":       func(p string) error { _, err := ParseJXFile(context.Background(), p, JXOptions{}); return err },
	}
	tests := []struct {
		path, want string
	}{
		{filepath.Join(dir, "nope"), "workflow " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{dir, "workflow " + dir + ": a directory, not a file"},
	}
	for form, parse := range parsers {
		for _, tt := range tests {
			err := parse(tt.path)
			if err == nil || err.Error() != tt.want {
				t.Errorf("%s %s: error %v, want %q", form, tt.path, err, tt.want)
			}
		}
	}
	if err := parsers["Makeflow"](filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing workflow's error %v is not fs.ErrNotExist", err)
	}
}
