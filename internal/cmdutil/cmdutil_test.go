package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailure},
		{Usagef("bad flag %q", "-z"), ExitUsage},
		{fmt.Errorf("wrapped: %w", Usagef("x")), ExitUsage},
		{fmt.Errorf("stopped: %w", context.Canceled), ExitInterrupted},
		{&ExitError{Code: 7, Err: errors.New("custom")}, 7},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestExecute(t *testing.T) {
	newCmd := func(runErr error) *cobra.Command {
		cmd := &cobra.Command{Use: "tool ARG", Args: ExactArgs(1), RunE: func(*cobra.Command, []string) error { return runErr }}
		cmd.Flags().Int("n", 0, "a number")
		cmd.Flags().IntP("jobs", "j", 0, "a number")
		cmd.Flags().Float64("rate", 0, "a rate")
		cmd.Flags().Bool("dry", false, "a boolean")
		var wait time.Duration
		cmd.Flags().Var(Seconds(&wait), "wait", "a duration")
		return cmd
	}
	tests := []struct {
		name    string
		runErr  error
		args    []string
		code    int
		stderr  []string
		noWords []string
	}{
		{name: "ok", args: []string{"x"}, code: 0},
		{name: "failure", runErr: errors.New("input.txt:3: bad line"), args: []string{"x"}, code: 1, stderr: []string{"tool: input.txt:3: bad line"}, noWords: []string{"--help"}},
		{name: "silent", runErr: ErrSilent, args: []string{"x"}, code: 1, noWords: []string{"failed"}},
		{name: "interrupted", runErr: fmt.Errorf("interrupted with 3 of 9 rules done: %w", context.Canceled), args: []string{"x"}, code: 130,
			stderr: []string{"tool: interrupted with 3 of 9 rules done\n"}, noWords: []string{"context canceled"}},
		{name: "interrupted, no more said", runErr: context.Canceled, args: []string{"x"}, code: 130,
			stderr: []string{"tool: interrupted\n"}, noWords: []string{"context canceled"}},
		{name: "file", runErr: fmt.Errorf("--policy: %w", &fs.PathError{Op: "open", Path: "p.conf", Err: syscall.ENOENT}), args: []string{"x"}, code: 1,
			stderr: []string{"tool: --policy: p.conf: no such file or directory\n"}, noWords: []string{"open"}},
		{name: "bad flag", args: []string{"--n", "zz", "x"}, code: 2, stderr: []string{"tool: --n zz: not a whole number\n", "Run 'tool --help' for usage."}, noWords: []string{"strconv", "ParseInt"}},
		{name: "bad short flag", args: []string{"-j", "2.5", "x"}, code: 2, stderr: []string{"tool: -j/--jobs 2.5: not a whole number\n"}},
		{name: "out of range", args: []string{"--n", "99999999999999999999", "x"}, code: 2, stderr: []string{"tool: --n 99999999999999999999: out of range\n"}},
		{name: "bad float", args: []string{"--rate", "fast", "x"}, code: 2, stderr: []string{"tool: --rate fast: not a number\n"}},
		{name: "bad boolean", args: []string{"--dry=maybe", "x"}, code: 2, stderr: []string{"tool: --dry maybe: not true or false\n"}},
		{name: "bad duration", args: []string{"--wait", "soon", "x"}, code: 2, stderr: []string{"tool: --wait soon: bad duration \"soon\" (want seconds or e.g. 90s, 5m)\n"}},
		{name: "unknown flag", args: []string{"--zz", "x"}, code: 2, stderr: []string{"unknown flag: --zz"}},
		{name: "misspelt flag", args: []string{"--jbos", "2", "x"}, code: 2, stderr: []string{"tool: unknown flag --jbos (did you mean --jobs?)\n"}},
		{name: "missing arg", args: nil, code: 2, stderr: []string{"tool: expected 1 argument (tool ARG [flags]), got none\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Execute(context.Background(), newCmd(tt.runErr), tt.args, Streams{Out: &out, Err: &errb})
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errb.String())
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q does not contain %q", errb.String(), w)
				}
			}
			for _, w := range tt.noWords {
				if strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q contains %q", errb.String(), w)
				}
			}
		})
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a bytes.Buffer is a terminal")
	}
}

// TestVersionFlag: every tool answers --version with its name and the
// build; -v stays the tool's own where it has one.
func TestVersionFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		verbose bool // the command has its own -v
		want    string
	}{
		{"long", []string{"--version"}, true, "tool rightsize "},
		{"short where free", []string{"-v"}, false, "tool rightsize "},
		{"short taken", []string{"-v"}, true, "ran verbose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var verbose bool
			cmd := &cobra.Command{Use: "tool", RunE: func(cmd *cobra.Command, _ []string) error {
				if verbose {
					fmt.Fprint(cmd.OutOrStdout(), "ran verbose")
				}
				return nil
			}}
			if tc.verbose {
				cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "")
			}
			var out strings.Builder
			code := Execute(context.Background(), cmd, tc.args, Streams{In: strings.NewReader(""), Out: &out, Err: &out})
			if code != ExitOK || !strings.HasPrefix(out.String(), tc.want) {
				t.Errorf("%v: exit %d, %q; want %q", tc.args, code, out.String(), tc.want)
			}
		})
	}
}

// TestCompletion: the completion script is a flag, so that an argument
// named "completion" (a workflow file) is the command's, not cobra's; it
// is asked for anywhere before "--", but never by another flag's value.
func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--completion", "bash"}, ExitOK, "# bash completion V2 for tool"},
		{[]string{"--completion=zsh"}, ExitOK, "#compdef tool"},
		{[]string{"--completion", "fish"}, ExitOK, "# fish completion for tool"},
		{[]string{"--completion", "tcsh"}, ExitUsage, `tool: --completion "tcsh": give bash, zsh, fish or powershell`},
		{[]string{"completion"}, ExitOK, "ran with [completion]"},
		{[]string{"completion", "bash"}, ExitOK, "ran with [completion bash]"},
		{[]string{"-v", "--completion", "bash"}, ExitOK, "# bash completion V2 for tool"},
		{[]string{"-qv", "wf.mf", "--completion", "zsh"}, ExitOK, "#compdef tool"},
		{[]string{"wf.mf", "--completion=fish"}, ExitOK, "# fish completion for tool"},
		{[]string{"-l", "--completion", "bash"}, ExitOK, "ran with [bash]"},
		{[]string{"--log", "--completion", "bash"}, ExitOK, "ran with [bash]"},
		{[]string{"--", "--completion", "bash"}, ExitOK, "ran with [--completion bash]"},
		{[]string{"sub", "-n", "3", "--completion", "bash"}, ExitOK, "# bash completion V2 for tool"},
		{[]string{"sub", "-n", "--completion"}, ExitUsage, "tool sub: -n/--n --completion: not a whole number"},
	} {
		cmd := &cobra.Command{Use: "tool", Args: cobra.ArbitraryArgs, RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "ran with %v", args)
			return nil
		}}
		cmd.Flags().BoolP("verbose", "v", false, "")
		cmd.Flags().BoolP("quiet", "q", false, "")
		cmd.Flags().StringP("log", "l", "", "")
		sub := &cobra.Command{Use: "sub", Run: func(*cobra.Command, []string) {}}
		sub.Flags().IntP("n", "n", 0, "")
		cmd.AddCommand(sub)
		var out strings.Builder
		code := Execute(context.Background(), cmd, tc.args, Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		if code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: exit %d, %.200q; want %d, %q", tc.args, code, out.String(), tc.code, tc.want)
		}
	}
}
