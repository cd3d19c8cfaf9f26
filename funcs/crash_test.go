package funcs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
)

// TestCrashingSharedLibrary makes a .so function crash in every fatal way,
// in a child process (this test binary, running crashChild): the child
// prints one line naming the function, the signal and the call, and exits
// with status 1, without Go's stack dump.
func TestCrashingSharedLibrary(t *testing.T) {
	lib := testutil.BuildSharedLib(t, "testdata/crash.c")
	tests := []struct {
		signal, call string
		want         string // after "funcs.test: the function LIB crashed with "
	}{
		{"segv", "pair", "SIGSEGV (a bad memory access at 0x0) on A/bad and B/bad"},
		{"segv", "pair without paths", "SIGSEGV (a bad memory access at 0x0)"},
		{"segv", "cell", "SIGSEGV (a bad memory access at 0x0) computing cell (3,2)"},
		{"bus", "pair", "SIGBUS (a bad memory access) on A/bad and B/bad"},
		{"fpe", "cell", "SIGFPE (an arithmetic error, such as a division by zero) computing cell (3,2)"},
		{"ill", "pair", "SIGILL (an illegal instruction) on A/bad and B/bad"},
		{"abrt", "pair", "SIGABRT (it called abort, or a check in the C library failed) on A/bad and B/bad"},
	}
	for _, tt := range tests {
		t.Run(tt.signal+"/"+tt.call, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
			cmd.Env = append(os.Environ(), "FUNCS_CRASH_LIB="+lib, "FUNCS_CRASH_CALL="+tt.call,
				"CRASH_SIGNAL="+tt.signal, "CRASH_SUM=42")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("child: %v, want exit status 1\nstderr:\n%s", err, stderr.String())
			}
			want := fmt.Sprintf("%s: the function %s crashed with %s\n", filepath.Base(os.Args[0]), lib, tt.want)
			if stderr.String() != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), want)
			}
		})
	}
}

// TestCrashChild is the child of TestCrashingSharedLibrary; it does nothing
// in a normal run.
func TestCrashChild(t *testing.T) {
	lib := os.Getenv("FUNCS_CRASH_LIB")
	if lib == "" {
		t.Skip("run by TestCrashingSharedLibrary")
	}
	reg := funcs.NewRegistry()
	ctx := context.Background()
	bad := []byte("bad")
	switch os.Getenv("FUNCS_CRASH_CALL") {
	case "pair", "pair without paths":
		f, err := reg.OpenPair(lib, funcs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a, b := funcs.Input{Data: bad}, funcs.Input{Data: bad}
		if os.Getenv("FUNCS_CRASH_CALL") == "pair" {
			a.Path, b.Path = "A/bad", "B/bad"
		}
		// Calls that do not crash come back as usual.
		if out, err := f.Call(ctx, funcs.Input{Path: "A/x", Data: []byte("x")}, b); err != nil || string(out) != "xb" {
			t.Fatalf("a call that should not crash: %q, %v", out, err)
		}
		f.Call(ctx, a, b)
	case "cell":
		f, err := reg.OpenCell(lib, funcs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var label funcs.Label
		ctx = funcs.WithLabel(ctx, &label)
		label.SetCell(3, 2)
		f.Call(ctx, funcs.Input{Data: []byte("40")}, funcs.Input{Data: []byte("1")}, funcs.Input{Data: []byte("1")})
	}
	t.Fatal("the function did not crash")
}

// Loading a library installs a handler for the fatal signals; faults in Go
// code still become panics, and Go functions that panic still fail only
// their call.
func TestGoFaultsStillPanicWithALibraryLoaded(t *testing.T) {
	reg := funcs.NewRegistry()
	f, err := reg.OpenPair(testutil.BuildSharedLib(t, "testdata/crash.c"), funcs.Options{})
	if errors.Is(err, funcs.ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p *[1 << 20]byte
	faulted := func() (r any) {
		defer func() { r = recover() }()
		return p[1<<19] // a real fault: the address is beyond the nil check's page
	}()
	if err, ok := faulted.(error); !ok || !strings.Contains(err.Error(), "nil pointer dereference") {
		t.Errorf("recovered %v, want a nil pointer dereference", faulted)
	}
	reg.RegisterPair("nil", func(a, b []byte) ([]byte, error) { return []byte{p[1<<19]}, nil })
	g, err := reg.OpenPair("builtin:nil", funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Call(context.Background(), funcs.Input{Data: []byte("a")}, funcs.Input{Data: []byte("b")}); err == nil || !strings.Contains(err.Error(), "nil pointer dereference") {
		t.Errorf("a Go function that faults: %v", err)
	}
}
