// Package cmdutil holds what the rightsize command-line tools share: the
// input/output streams a command runs with, the mapping from errors to exit
// codes, the plumbing that turns a cobra command into a testable Main,
// result files that replace the user's previous file only once complete,
// and a duration flag that takes bare seconds as CCTools' tools do. A tool
// run by RunMain stops as after Ctrl-C when the reader of its output goes
// away (exit 141), rather than dying of SIGPIPE with its jobs left behind.
//
// Execute words the errors of flags and arguments for the user rather
// than as pflag and cobra do ("-j/--max-local x: not a whole number",
// "unknown flag --chekc (did you mean --check?)", "expected 3 arguments
// (allpairs [flags] FUNC A B), got 2: ..."), drops the system call from a
// file's error ("nope.conf: no such file or directory"), and answers
// --completion SHELL wherever it is given before "--". ClassifyArgs tells
// flags, their values and positional arguments apart before parsing;
// CheckOutputPath refuses, before anything runs, an output file that could
// not be created, naming its flag.
//
// It does not parse any tool's flags or know any tool's behaviour; each tool
// builds its own cobra command and hands it to Execute.
package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Exit codes shared by every rightsize tool.
const (
	ExitOK          = 0   // everything asked for was done
	ExitFailure     = 1   // the run failed, or finished with failed cells, rules or tasks
	ExitUsage       = 2   // bad flags or arguments; nothing was run
	ExitInterrupted = 130 // stopped by SIGINT or SIGTERM; finished work was kept
	ExitBrokenPipe  = 141 // stopped because its output's reader went away (| head); finished work was kept
)

// Streams are the standard streams a command reads and writes. Commands take
// them as arguments so that tests can run them in-process.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// StdStreams returns the process's own standard streams.
func StdStreams() Streams {
	return Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
}

// IsTerminal reports whether w is a terminal. Anything that is not an
// *os.File (a buffer in a test, a pipe wrapper) is not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// UsageError is an error in how a command was invoked: a bad flag, a missing
// argument, an impossible combination. It maps to ExitUsage and is printed
// with a hint to run --help.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a *UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// ExitError carries an explicit exit code for errors that are neither usage
// errors nor plain failures.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ErrSilent marks an error whose details the command has already printed; the
// caller only maps it to an exit code.
var ErrSilent = errors.New("failed (details above)")

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	var usage *UsageError
	var exit *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &exit):
		return exit.Code
	case errors.As(err, &usage):
		return ExitUsage
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	default:
		return ExitFailure
	}
}

// ExactArgs requires n arguments; otherwise it returns a usage error that
// says what the command takes and what it was given: "expected 3
// arguments (allpairs [flags] FUNC A B), got 2: builtin:bytediff A".
func ExactArgs(n int) cobra.PositionalArgs {
	return RangeArgs(n, n)
}

// RangeArgs requires between min and max arguments, as ExactArgs does n.
func RangeArgs(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= min && len(args) <= max {
			return nil
		}
		var want string
		switch {
		case min == max:
			want = "expected " + countWords(max)
		case len(args) > max:
			want = "expected at most " + countWords(max)
		default:
			want = "expected at least " + countWords(min)
		}
		got := "none"
		if len(args) > 0 {
			got = fmt.Sprintf("%d: %s", len(args), strings.Join(args, " "))
		}
		return Usagef("%s (%s), got %s", want, cmd.UseLine(), got)
	}
}

// countWords says n arguments in words: "no arguments", "1 argument".
func countWords(n int) string {
	if n == 0 {
		return "no arguments"
	}
	return Plural(n, "argument")
}

// Execute runs cmd with args and streams and returns the exit code. It prints
// a failing command's error once, as "NAME: message", followed for usage
// errors by a pointer to --help. Commands should set RunE and return errors
// rather than print them.
func Execute(ctx context.Context, cmd *cobra.Command, args []string, s Streams) int {
	Prepare(cmd)
	if shell, ok := completionArg(cmd, args); ok {
		return writeCompletion(cmd, shell, s)
	}
	cmd.SetArgs(args)
	cmd.SetIn(s.In)
	cmd.SetOut(s.Out)
	cmd.SetErr(s.Err)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	cmd.SetFlagErrorFunc(flagError)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	name := cmd.Name()
	if c, _, ferr := cmd.Find(args); ferr == nil && c != nil {
		name = c.CommandPath()
	}
	if !errors.Is(err, ErrSilent) {
		msg := err.Error()
		if errors.Is(err, context.Canceled) {
			// The interruption says so in words; Go's name for it is noise.
			msg = strings.TrimSuffix(msg, ": "+context.Canceled.Error())
			if msg == context.Canceled.Error() {
				msg = "interrupted"
			}
		}
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			// "nope.conf: no such file or directory": the system
			// call's name ("open nope.conf: ...") says nothing to
			// the user.
			msg = strings.Replace(msg, pathErr.Error(), pathErr.Path+": "+pathErr.Err.Error(), 1)
		}
		fmt.Fprintf(s.Err, "%s: %s\n", name, msg)
	}
	code := ExitCode(err)
	if code == ExitUsage {
		fmt.Fprintf(s.Err, "Run '%s --help' for usage.\n", name)
	}
	return code
}

// Version says which build of rightsize this is, from the binary's build
// information: "rightsize VERSION (commit REV)", the module's version (a
// pseudo-version for a build from a clone) and the commit it was built
// from, "modified" if the tree had uncommitted changes.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "rightsize (no build information)"
	}
	var rev, modified string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			modified = kv.Value
		}
	}
	v := "rightsize " + bi.Main.Version
	if rev != "" {
		v += " (commit " + rev[:min(len(rev), 12)]
		if modified == "true" {
			v += ", modified"
		}
		v += ")"
	}
	return v
}

// MainFunc is the importable entry point of a tool.
type MainFunc func(ctx context.Context, args []string, s Streams) int

// RunMain runs main with the process's arguments and streams, cancels its
// context on SIGINT or SIGTERM, and exits with the code it returns. It is all
// a tool's main package needs to do.
//
// It also cancels the context when the reader of the standard output or
// error goes away (makeflow wf.mf | head), and then exits ExitBrokenPipe:
// by default a Go program writing to such a pipe is killed by SIGPIPE at
// once, leaving its batch jobs queued and its children running.
func RunMain(main MainFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(ctx)
	// Asked for before main writes anything: until then a broken pipe
	// kills the process.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watchBrokenPipe(ctx, sigpipe, cancel)
	}()
	code := main(ctx, os.Args[1:], StdStreams())
	if errors.Is(context.Cause(ctx), errBrokenPipe) {
		code = ExitBrokenPipe
	}
	cancel(nil)
	<-watched
	signal.Stop(sigpipe)
	stop()
	os.Exit(code)
}

var errBrokenPipe = errors.New("the reader of the standard output or error went away")

// watchBrokenPipe cancels ctx when a write to the standard output or error
// finds its pipe without a reader. Asking for SIGPIPE (on sig) turns that
// write's death into an EPIPE error; the signal comes for sockets too (a
// worker gone), so only a standard stream whose pipe reports an error
// stops the run.
func watchBrokenPipe(ctx context.Context, sig <-chan os.Signal, cancel context.CancelCauseFunc) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			if pipeBroken(1) || pipeBroken(2) {
				cancel(errBrokenPipe)
				return
			}
		}
	}
}

// pipeBroken reports whether descriptor fd is a pipe whose reader is
// gone: on Linux the write end of such a pipe polls as an error.
func pipeBroken(fd int32) bool {
	fds := []unix.PollFd{{Fd: fd}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 1 && fds[0].Revents&unix.POLLERR != 0
}

// Prepare gives a tool's root command what every tool has: --version
// (-v too where -v is free) and --completion SHELL, a flag rather than
// cobra's subcommand, so that it never shadows an argument (a workflow
// file named "completion"). Execute calls it; so does the generator of
// the manual pages.
func Prepare(cmd *cobra.Command) {
	if cmd.Version == "" && cmd.Flags().Lookup("version") == nil {
		cmd.Version = Version()
		cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	if cmd.Flags().Lookup("completion") == nil {
		cmd.Flags().String("completion", "", "print the shell completion script for `SHELL` (bash, zsh, fish or powershell) and exit")
	}
}

// completionArg reports whether args ask for the completion script, and
// for which shell: --completion SHELL or --completion=SHELL anywhere a
// flag may be, before "--", for cmd or any of its subcommands. An
// argument that is another flag's value (makeflow -l --completion) or
// comes after "--" is not it.
func completionArg(cmd *cobra.Command, args []string) (string, bool) {
	c, rest := cmd, args
	if found, r, err := cmd.Find(args); err == nil {
		c, rest = found, r
	}
	flags := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	flags.AddFlagSet(c.Flags())
	flags.AddFlagSet(c.InheritedFlags())
	if f := cmd.Flags().Lookup("completion"); f != nil && flags.Lookup("completion") == nil {
		flags.AddFlag(f) // the root's own flag, for a subcommand too
	}
	kinds := ClassifyArgs(flags, rest)
	for i, a := range rest {
		if kinds[i] != ArgFlag {
			continue
		}
		if shell, ok := strings.CutPrefix(a, "--completion="); ok {
			return shell, true
		}
		if a == "--completion" {
			if i+1 < len(rest) && kinds[i+1] == ArgFlagValue {
				return rest[i+1], true
			}
			return "", true
		}
	}
	return "", false
}

// writeCompletion writes cmd's completion script for shell to s.Out.
func writeCompletion(cmd *cobra.Command, shell string, s Streams) int {
	var err error
	switch shell {
	case "bash":
		err = cmd.GenBashCompletionV2(s.Out, true)
	case "zsh":
		err = cmd.GenZshCompletion(s.Out)
	case "fish":
		err = cmd.GenFishCompletion(s.Out, true)
	case "powershell":
		err = cmd.GenPowerShellCompletionWithDesc(s.Out)
	default:
		fmt.Fprintf(s.Err, "%s: --completion %q: give bash, zsh, fish or powershell\n", cmd.Name(), shell)
		return ExitUsage
	}
	if err != nil {
		fmt.Fprintf(s.Err, "%s: --completion: %v\n", cmd.Name(), err)
		return ExitFailure
	}
	return ExitOK
}

// Plural says n of noun, in the number n needs: "1 cell", "2 cells".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
