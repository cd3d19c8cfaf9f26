package cmdutil

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// brokenPipeChild is set in the environment of the process that
// TestBrokenPipeStops starts: a tool, run by RunMain, that writes lines until
// its context ends, then says so in a file.
const brokenPipeChild = "RIGHTSIZE_TEST_BROKEN_PIPE_CHILD"

func init() {
	done := os.Getenv(brokenPipeChild)
	if done == "" {
		return
	}
	RunMain(func(ctx context.Context, _ []string, s Streams) int {
		for i := 0; ctx.Err() == nil; i++ {
			fmt.Fprintln(s.Out, "line", i)
		}
		if err := os.WriteFile(done, []byte("cleaned up\n"), 0o644); err != nil {
			return ExitFailure
		}
		return ExitCode(ctx.Err())
	})
}

// TestBrokenPipeStops: a tool whose output's reader goes away is not
// killed by SIGPIPE mid-write; its context ends, it cleans up, and it
// exits ExitBrokenPipe.
func TestBrokenPipeStops(t *testing.T) {
	done := filepath.Join(t.TempDir(), "done")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), brokenPipeChild+"="+done)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "line 0\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	out.Close() // as head does after its lines
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != ExitBrokenPipe {
		t.Fatalf("child ended with %v; want exit %d", err, ExitBrokenPipe)
	}
	if b, err := os.ReadFile(done); err != nil || string(b) != "cleaned up\n" {
		t.Errorf("child did not clean up: %q, %v", b, err)
	}
}
