package funcs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/testutil"
)

func naiveDiff(a, b []byte) int {
	n := max(len(a), len(b))
	d := 0
	for i := 0; i < n; i++ {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			d++
		}
	}
	return d
}

func TestByteDiffAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 500; trial++ {
		a := make([]byte, rng.IntN(200))
		b := make([]byte, rng.IntN(200))
		// Few symbols make equal bytes common; the full range exercises
		// the top bit of every byte.
		symbols := 4
		if trial%2 == 0 {
			symbols = 256
		}
		for i := range a {
			a[i] = byte(rng.IntN(symbols))
		}
		for i := range b {
			b[i] = byte(rng.IntN(symbols))
		}
		got, err := funcs.ByteDiff(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(naiveDiff(a, b)); string(got) != want {
			t.Fatalf("ByteDiff(%v, %v) = %s, want %s", a, b, got, want)
		}
	}
}

// TestByteDiffLengths: lengths on both sides of the kernel's 8-, 16-, 32-
// and 2048-byte steps, differences placed at the ends of chunks and in the
// tails, and inputs of unequal length.
func TestByteDiffLengths(t *testing.T) {
	tests := []struct {
		name   string
		la, lb int
		diffAt []int // positions where b differs from a (within both)
	}{
		{"both empty", 0, 0, nil},
		{"one empty", 0, 5, nil},
		{"one byte, equal", 1, 1, nil},
		{"one byte, different", 1, 1, []int{0}},
		{"7 bytes, last differs", 7, 7, []int{6}},
		{"8 bytes", 8, 8, []int{0, 7}},
		{"15 bytes", 15, 15, []int{8, 14}},
		{"17 bytes", 17, 17, []int{16}},
		{"31 bytes", 31, 31, []int{0, 30}},
		{"33 bytes", 33, 33, []int{32}},
		{"a chunk less one", 2047, 2047, []int{2046}},
		{"a chunk", 2048, 2048, []int{0, 2047}},
		{"a chunk and one", 2049, 2049, []int{2047, 2048}},
		{"chunks and a tail", 3*2048 + 13, 3*2048 + 13, []int{2048, 4095, 6144, 6156}},
		{"all differ across chunks", 5000, 5000, nil},
		{"longer a", 4100, 2050, []int{2049}},
		{"longer b", 2050, 4100, []int{0}},
		{"1 MiB", 1 << 20, 1 << 20, []int{1, 1<<20 - 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := make([]byte, tc.la), make([]byte, tc.lb)
			for i := range a {
				a[i] = byte(i*7 + 1)
			}
			for i := range b {
				b[i] = byte(i*7 + 1)
			}
			if tc.name == "all differ across chunks" {
				for i := range b {
					b[i] ^= 0x80
				}
			}
			for _, i := range tc.diffAt {
				b[i]++
			}
			got, err := funcs.ByteDiff(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if want := strconv.Itoa(naiveDiff(a, b)); string(got) != want {
				t.Errorf("ByteDiff of %d and %d bytes = %s, want %s", tc.la, tc.lb, got, want)
			}
		})
	}
}

// FuzzByteDiff checks the kernel against the byte-by-byte loop. The seed
// corpus crosses a chunk; the fuzzer mutates lengths and contents, and the
// shift lets it misalign one input against the other.
func FuzzByteDiff(f *testing.F) {
	long := bytes.Repeat([]byte("GATTACA"), 700)
	f.Add([]byte{}, []byte{}, uint8(0))
	f.Add([]byte("GATTACA"), []byte("GACTACA"), uint8(0))
	f.Add(long, long, uint8(3))
	f.Add(long, long[:2049], uint8(1))
	f.Fuzz(func(t *testing.T, a, b []byte, shift uint8) {
		if int(shift) < len(b) {
			b = b[shift:]
		}
		got, err := funcs.ByteDiff(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(naiveDiff(a, b)); string(got) != want {
			t.Errorf("ByteDiff(%d bytes, %d bytes) = %s, want %s", len(a), len(b), got, want)
		}
	})
}

// blockItems makes n inputs of the given lengths, each differing from the
// others in a few bytes (and in all of them for every third input), so that
// the counts are neither all zero nor all the length.
func blockItems(rng *rand.Rand, lengths []int) [][]byte {
	items := make([][]byte, len(lengths))
	for k, n := range lengths {
		x := make([]byte, n)
		for i := range x {
			x[i] = byte(i * 7)
		}
		for range min(n, 5) {
			x[rng.IntN(n)] ^= byte(1 + rng.IntN(255))
		}
		if k%3 == 2 {
			for i := range x {
				x[i] ^= 0x55
			}
		}
		items[k] = x
	}
	return items
}

// checkBlock compares ByteDiffBlock's results with the byte-by-byte loop,
// cell by cell.
func checkBlock(t *testing.T, a, b [][]byte) {
	t.Helper()
	got, err := funcs.ByteDiffBlock(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(a)*len(b) {
		t.Fatalf("%d results for a %d×%d block", len(got), len(a), len(b))
	}
	for r, x := range a {
		for c, y := range b {
			if want := strconv.Itoa(naiveDiff(x, y)); string(got[r*len(b)+c]) != want {
				t.Errorf("cell (%d,%d) of %d and %d bytes = %s, want %s", r, c, len(x), len(y), got[r*len(b)+c], want)
			}
		}
	}
}

// TestByteDiffBlock: blocks of every shape, inputs that end on either side
// of a section (64 KiB for a few inputs, less for many), and inputs of
// different lengths in one block.
func TestByteDiffBlock(t *testing.T) {
	const sec = 64 << 10
	tests := []struct {
		name   string
		la, lb []int
	}{
		{"no rows", nil, []int{10, 20}},
		{"no columns", []int{10}, nil},
		{"one cell", []int{100}, []int{100}},
		{"empty inputs", []int{0, 5}, []int{0, 3, 5}},
		{"a section less one, one, and one more", []int{sec - 1, sec}, []int{sec, sec + 1}},
		{"several sections", []int{3*sec + 17}, []int{3*sec + 17, 2 * sec, 1}},
		{"4×10 of 1 MiB", []int{1 << 20, 1 << 20, 1 << 20, 1 << 20},
			[]int{1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1<<20 - 3}},
		{"many inputs, small sections", []int{40000, 40001, 39999}, make([]int, 60)},
		{"rows longer than every column", []int{5 * sec}, []int{sec / 2, sec}},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lb := tc.lb
			if tc.name == "many inputs, small sections" {
				for i := range lb {
					lb[i] = 30000 + 997*i
				}
			}
			checkBlock(t, blockItems(rng, tc.la), blockItems(rng, lb))
		})
	}
}

// FuzzByteDiffBlock checks blocks against the byte-by-byte loop: the fuzzer
// chooses the contents, the block's shape and each input's length (a
// suffix of the data's first 4 KiB, repeated up to 40 times so that inputs cross
// sections).
func FuzzByteDiffBlock(f *testing.F) {
	f.Add(bytes.Repeat([]byte("GATTACA"), 500), uint8(3), uint8(4), uint8(20), uint64(0x123456789))
	f.Add([]byte{}, uint8(1), uint8(1), uint8(1), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, rows, cols, repeat uint8, cuts uint64) {
		data = data[:min(len(data), 4<<10)]
		items := make([][]byte, int(rows%6)+int(cols%12))
		for k := range items {
			n := 0
			if len(data) > 0 {
				n = int(cuts>>(k%16*4)%16) * len(data) / 15
			}
			items[k] = bytes.Repeat(data[len(data)-n:], 1+int(repeat)%40)
			if k%2 == 1 && len(items[k]) > 0 {
				items[k][len(items[k])/2]++
			}
		}
		checkBlock(t, items[:rows%6], items[rows%6:])
	})
}

// TestBlockPair: the built-in bytediff opens as a BlockPair, unless a
// timeout makes it a cell at a time; its blocks are its cells, a block
// func that panics fails its block with a *CallError, and RegisterPair
// drops a name's block form.
func TestBlockPair(t *testing.T) {
	reg := funcs.NewRegistry()
	ctx := context.Background()
	f, err := reg.OpenPair("builtin:bytediff", funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bp, ok := f.(funcs.BlockPair)
	if !ok {
		t.Fatalf("builtin:bytediff is a %T, not a BlockPair", f)
	}
	a := []funcs.Input{{Data: []byte("GATTACA")}, {Data: []byte("")}}
	b := []funcs.Input{{Data: []byte("GACTACA")}, {Data: []byte("GATT")}, {Data: []byte("CATTACAT")}}
	out := make([][]byte, len(a)*len(b))
	if err := bp.CallBlock(ctx, a, b, out); err != nil {
		t.Fatal(err)
	}
	for r := range a {
		for c := range b {
			want, err := f.Call(ctx, a[r], b[c])
			if err != nil || string(out[r*len(b)+c]) != string(want) {
				t.Errorf("block cell (%d,%d) = %s; Call gives %s, %v", r, c, out[r*len(b)+c], want, err)
			}
		}
	}
	if err := bp.CallBlock(ctx, a, b, out[:2]); err == nil {
		t.Error("CallBlock with too few results: no error")
	}

	if f, _ := reg.OpenPair("builtin:bytediff", funcs.Options{Timeout: time.Second}); isBlockPair(f) {
		t.Error("builtin:bytediff with a timeout is a BlockPair; want a cell at a time")
	}

	reg.RegisterPairBlock("boom", funcs.ByteDiff, func(a, b [][]byte) ([][]byte, error) { panic("boom") })
	boom, _ := reg.OpenPair("builtin:boom", funcs.Options{})
	var ce *funcs.CallError
	if err := boom.(funcs.BlockPair).CallBlock(ctx, a, b, out); !errors.As(err, &ce) || !strings.Contains(err.Error(), "panic: boom") {
		t.Errorf("a panicking block: %v, want a *CallError naming the panic", err)
	}
	reg.RegisterPair("boom", funcs.ByteDiff)
	if f, _ := reg.OpenPair("builtin:boom", funcs.Options{}); isBlockPair(f) {
		t.Error("RegisterPair kept the name's block form")
	}
}

func isBlockPair(f funcs.Pair) bool {
	_, ok := f.(funcs.BlockPair)
	return ok
}

func TestSWAlign(t *testing.T) {
	tests := []struct {
		a, b string
		want string
	}{
		{"TGTTACGG", "GGTTGACTA", "13"}, // the textbook example
		{"GGTTGACTA", "TGTTACGG", "13"}, // symmetric
		{"ACGT", "ACGT", "12"},
		{"AAAA", "TTTT", "0"},
		{"", "ACGT", "0"},
		{">seq1 some header\nacgt\nACGT\n", ">seq2\nACGTACGT", "24"}, // FASTA, case-insensitive
	}
	for _, tt := range tests {
		got, err := funcs.SWAlign([]byte(tt.a), []byte(tt.b))
		if err != nil || string(got) != tt.want {
			t.Errorf("SWAlign(%q, %q) = %s, %v; want %s", tt.a, tt.b, got, err, tt.want)
		}
	}
}

func TestSumOracle(t *testing.T) {
	// R[i,0] = i, R[0,j] = j, R[i,j] = sum of the three neighbours.
	const n = 9
	var r [n + 1][n + 1][]byte
	for i := 0; i <= n; i++ {
		r[i][0] = []byte(strconv.Itoa(i))
		r[0][i] = []byte(strconv.Itoa(i))
	}
	for i := 1; i <= n; i++ {
		for j := 1; j <= n; j++ {
			v, err := funcs.Sum(r[i-1][j], r[i][j-1], r[i-1][j-1])
			if err != nil {
				t.Fatal(err)
			}
			r[i][j] = v
		}
	}
	if got := string(r[n][n]); got != "1854882" {
		t.Errorf("R[9,9] = %s, want 1854882", got)
	}
}

func TestSumBig(t *testing.T) {
	tests := []struct{ x, y, d, want string }{
		{"9223372036854775807", "1", "0", "9223372036854775808"},
		{"99999999999999999999999999", "1", "-1", "99999999999999999999999999"},
		{" 1\n", "2\n", "3", "6"},
		{"-5", "2", "1", "-2"},
	}
	for _, tt := range tests {
		got, err := funcs.Sum([]byte(tt.x), []byte(tt.y), []byte(tt.d))
		if err != nil || string(got) != tt.want {
			t.Errorf("Sum(%q, %q, %q) = %s, %v; want %s", tt.x, tt.y, tt.d, got, err, tt.want)
		}
	}
	if _, err := funcs.Sum([]byte("x"), []byte("1"), []byte("1")); err == nil {
		t.Error("Sum of a non-integer succeeded")
	}
}

func TestSplitArgs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{"-a -b", []string{"-a", "-b"}, false},
		{"  -t   0.5 ", []string{"-t", "0.5"}, false},
		{`'a b' "c d"`, []string{"a b", "c d"}, false},
		{`"x\"y" 'q\w'`, []string{`x"y`, `q\w`}, false},
		{`a\ b`, []string{"a b"}, false},
		{`""`, []string{""}, false},
		{`$HOME`, []string{"$HOME"}, false},
		{`'unterminated`, nil, true},
		{`trailing\`, nil, true},
	}
	for _, tt := range tests {
		got, err := funcs.SplitArgs(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("SplitArgs(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) || len(got) != len(tt.want) {
			t.Errorf("SplitArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProgramPair(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a", "hello")
	b := writeFile(t, dir, "b", "world")
	reg := funcs.NewRegistry()
	ctx := context.Background()

	tests := []struct {
		name    string
		body    string
		opts    funcs.Options
		want    string
		check   func(t *testing.T, e *funcs.CallError)
		wantErr bool
	}{
		{name: "result", body: `printf '%s %s\n\n' "$(cat "$1")" "$(cat "$2")"`, want: "hello world"},
		{name: "extra args first", body: `echo "$@"`, opts: funcs.Options{Args: []string{"-x", "two words"}}, want: "-x two words " + a + " " + b},
		{name: "empty output", body: `true`, want: ""},
		{name: "exit status", body: "echo partial; echo 'bad input' >&2; exit 3", wantErr: true, check: func(t *testing.T, e *funcs.CallError) {
			if e.ExitCode != 3 || !strings.Contains(string(e.Stderr), "bad input") {
				t.Errorf("got exit %d, stderr %q; want 3 and the message", e.ExitCode, e.Stderr)
			}
		}},
		{name: "signal", body: "kill -SEGV $$", wantErr: true, check: func(t *testing.T, e *funcs.CallError) {
			if e.Signal != syscall.SIGSEGV || e.ExitCode != -1 {
				t.Errorf("got signal %v exit %d, want SIGSEGV", e.Signal, e.ExitCode)
			}
		}},
		{name: "timeout", body: "echo started >&2; exec sleep 30", opts: funcs.Options{Timeout: 200 * time.Millisecond}, wantErr: true, check: func(t *testing.T, e *funcs.CallError) {
			if !e.TimedOut || !strings.Contains(e.Error(), "timed out after 200ms") || !strings.Contains(string(e.Stderr), "started") {
				t.Errorf("got %v, want a timeout with stderr", e)
			}
		}},
		{name: "timeout ignoring TERM", body: "trap '' TERM; echo started >&2; sleep 30", opts: funcs.Options{Timeout: 100 * time.Millisecond}, wantErr: true, check: func(t *testing.T, e *funcs.CallError) {
			if !e.TimedOut {
				t.Errorf("got %v, want a timeout", e)
			}
		}},
		{name: "result too large", body: "head -c 5000 /dev/zero", opts: funcs.Options{MaxResult: 100}, wantErr: true, check: func(t *testing.T, e *funcs.CallError) {
			if !errors.Is(e, funcs.ErrTooLarge) {
				t.Errorf("got %v, want ErrTooLarge", e)
			}
		}},
		{name: "stderr tail bounded", body: "for i in $(seq 1 2000); do echo line$i >&2; done; exit 1", opts: funcs.Options{StderrTail: 64}, wantErr: true, check: func(t *testing.T, e *funcs.CallError) {
			if len(e.Stderr) > 64 || !strings.Contains(string(e.Stderr), "line2000") {
				t.Errorf("stderr tail = %q, want at most 64 bytes ending with line2000", e.Stderr)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog := testutil.WriteScript(t, t.TempDir(), "f", tt.body)
			f, err := reg.OpenPair(prog, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Info().Kind != funcs.Program || f.Info().Path != prog {
				t.Errorf("Info = %+v", f.Info())
			}
			// Twice, so that the reused output files are exercised.
			for i := 0; i < 2; i++ {
				got, err := f.Call(ctx, funcs.Input{Path: a}, funcs.Input{Path: b})
				if tt.wantErr {
					var ce *funcs.CallError
					if !errors.As(err, &ce) {
						t.Fatalf("Call error = %v, want *CallError", err)
					}
					tt.check(t, ce)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != tt.want {
					t.Errorf("Call = %q, want %q", got, tt.want)
				}
			}
		})
	}
}

// TestProgramSuccessiveOutputs: calls one after another, which reuse the
// same output files, each see only their own standard output and error,
// whether it is empty, bigger than a read, or big enough that the files are
// emptied before the next call.
func TestProgramSuccessiveOutputs(t *testing.T) {
	dir := t.TempDir()
	prog := testutil.WriteScript(t, dir, "f", `cat "$1"; echo "stderr of $(head -c 12 "$1")" >&2; case "$(head -c 4 "$1")" in fail) exit 1;; esac`)
	f, err := funcs.NewRegistry().OpenPair(prog, funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls := []struct {
		name, input string
		fails       bool
	}{
		{"short", "short one", false},
		{"failing", "fail first", true},
		{"empty", "", false},
		{"bigger than a read", strings.Repeat("0123456789", 1000), false},
		{"failing after a long output", "fail second", true},
		{"past the files' reuse size", strings.Repeat("abcdefghij", 150_000), false},
		{"short after they were emptied", "short two", false},
		{"failing at the end", "fail third", true},
	}
	for _, c := range calls {
		in := writeFile(t, dir, "in", c.input)
		got, err := f.Call(context.Background(), funcs.Input{Path: in}, funcs.Input{Path: in})
		var ce *funcs.CallError
		switch {
		case c.fails && !errors.As(err, &ce):
			t.Fatalf("%s: Call = %v, want a *CallError", c.name, err)
		case c.fails:
			if want := "stderr of " + c.input[:min(12, len(c.input))] + "\n"; string(ce.Stderr) != want {
				t.Errorf("%s: stderr %q, want only this call's, %q", c.name, ce.Stderr, want)
			}
		case err != nil:
			t.Fatalf("%s: %v", c.name, err)
		case string(got) != c.input:
			t.Errorf("%s: output of %d bytes (%.20q...), want the input's %d", c.name, len(got), got, len(c.input))
		}
	}
}

func TestProgramDataInputs(t *testing.T) {
	prog := testutil.WriteScript(t, t.TempDir(), "f", `cat "$1" "$2" "$3"`)
	tmp := t.TempDir()
	f, err := funcs.NewRegistry().OpenCell(prog, funcs.Options{TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := f.Call(context.Background(), funcs.Input{Data: []byte("x")}, funcs.Input{Data: []byte("y")}, funcs.Input{Data: []byte{}})
	if err != nil || string(got) != "xy" {
		t.Fatalf("Call = %q, %v; want xy", got, err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("temporary inputs left behind: %v", entries)
	}
}

func TestProgramCancel(t *testing.T) {
	prog := testutil.WriteScript(t, t.TempDir(), "f", "exec sleep 30")
	f, err := funcs.NewRegistry().OpenPair(prog, funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = f.Call(ctx, funcs.Input{Path: "/dev/null"}, funcs.Input{Path: "/dev/null"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Call after cancel = %v, want context.Canceled", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := writeFile(t, dir, "notexec", "#!/bin/sh\n")
	garbage := writeFile(t, dir, "garbage.so", "not an ELF file")
	reg := funcs.NewRegistry()
	tests := []struct {
		spec string
		want string
	}{
		{filepath.Join(dir, "missing"), "no such file"},
		{"no-such-program-anywhere", "no such file in the current directory or in $PATH"},
		{notExec, "is not executable"},
		{dir, "is a directory"},
		{"builtin:nope", "unknown built-in function (All-Pairs built-ins: bitwise, bytediff, swalign)"},
		{"builtin:bytedif", "builtin:bytedif: unknown built-in function (did you mean builtin:bytediff?)"},
		{filepath.Join(dir, "missing.so"), "no such file"},
		{garbage, "cannot load"},
	}
	for _, tt := range tests {
		_, err := reg.OpenPair(tt.spec, funcs.Options{})
		if errors.Is(err, funcs.ErrNoCgo) {
			continue // a library cannot even be tried without cgo
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("OpenPair(%q) error = %v, want it to contain %q", tt.spec, err, tt.want)
		}
	}
	if _, err := reg.OpenCell("builtin:bytediff", funcs.Options{}); err == nil || !strings.Contains(err.Error(), "Wavefront built-ins: rdgame, sum, swcell") {
		t.Errorf("OpenCell(builtin:bytediff) error = %v, want the list of cell built-ins", err)
	}
	if _, err := reg.OpenCell("builtin:swcel", funcs.Options{}); err == nil || !strings.Contains(err.Error(), "(did you mean builtin:swcell?)") {
		t.Errorf("OpenCell(builtin:swcel) error = %v, want the built-in it is a typo of", err)
	}
}

func TestOpenByName(t *testing.T) {
	reg := funcs.NewRegistry()
	// A bare name is found in $PATH.
	f, err := reg.OpenPair("cmp", funcs.Options{Args: []string{"-s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Call(context.Background(), funcs.Input{Path: "/dev/null"}, funcs.Input{Path: "/dev/null"}); err != nil {
		t.Errorf("cmp -s /dev/null /dev/null: %v", err)
	}
	// CCTools' internal names map to built-ins.
	g, err := reg.OpenPair("BITWISE", funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := g.Call(context.Background(), funcs.Input{Data: []byte("ab")}, funcs.Input{Data: []byte("ac")}); string(got) != "1" {
		t.Errorf("BITWISE = %q, want 1", got)
	}
}

func TestGoFunctions(t *testing.T) {
	reg := funcs.NewRegistry()
	reg.RegisterPair("fails", func(a, b []byte) ([]byte, error) { return nil, errors.New("no template found") })
	reg.RegisterPair("panics", func(a, b []byte) ([]byte, error) { panic("index out of range") })
	reg.RegisterPair("hangs", func(a, b []byte) ([]byte, error) { time.Sleep(5 * time.Second); return nil, nil })
	reg.RegisterPair("concat", func(a, b []byte) ([]byte, error) { return append(append([]byte{}, a...), b...), nil })
	ctx := context.Background()
	dir := t.TempDir()
	path := writeFile(t, dir, "p", "from-file")

	tests := []struct {
		name    string
		opts    funcs.Options
		want    string
		wantErr string
	}{
		{name: "concat", want: "memfrom-file"},
		{name: "fails", wantErr: "builtin:fails: no template found"},
		{name: "panics", wantErr: "panic: index out of range"},
		{name: "hangs", opts: funcs.Options{Timeout: 50 * time.Millisecond}, wantErr: "timed out after 50ms"},
	}
	for _, tt := range tests {
		f, err := reg.OpenPair("builtin:"+tt.name, tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Call(ctx, funcs.Input{Data: []byte("mem")}, funcs.Input{Path: path})
		var ce *funcs.CallError
		switch {
		case tt.wantErr != "":
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error = %v, want a CallError containing %q", tt.name, err, tt.wantErr)
			}
		case err != nil || string(got) != tt.want:
			t.Errorf("%s = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestSharedLibrary(t *testing.T) {
	lib := testutil.BuildSharedLib(t, "testdata/bytediff.c")
	reg := funcs.NewRegistry()
	f, err := reg.OpenPair(lib, funcs.Options{})
	if errors.Is(err, funcs.ErrNoCgo) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if f.Info().Kind != funcs.SharedLibrary || !f.Info().Kind.InMemory() {
		t.Errorf("Info = %+v", f.Info())
	}
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	for trial := 0; trial < 50; trial++ {
		a := make([]byte, rng.IntN(3000))
		b := make([]byte, rng.IntN(3000))
		for i := range a {
			a[i] = byte(rng.IntN(3))
		}
		for i := range b {
			b[i] = byte(rng.IntN(3))
		}
		got, err := f.Call(ctx, funcs.Input{Data: a}, funcs.Input{Data: b})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := funcs.ByteDiff(a, b)
		if !bytes.Equal(got, want) {
			t.Fatalf("library = %s, built-in = %s", got, want)
		}
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	// The library does not export the Wavefront symbol.
	if _, err := reg.OpenCell(lib, funcs.Options{}); err == nil || !strings.Contains(err.Error(), "does not export wavefront_function") {
		t.Errorf("OpenCell on an All-Pairs library: %v", err)
	}

	cell, err := reg.OpenCell(testutil.BuildSharedLib(t, "testdata/sum.c"), funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cell.Close()
	if got, err := cell.Call(ctx, funcs.Input{Data: []byte("40")}, funcs.Input{Data: []byte("1")}, funcs.Input{Data: []byte("1")}); err != nil || string(got) != "42" {
		t.Errorf("sum.so = %q, %v; want 42", got, err)
	}

	null, err := reg.OpenPair(testutil.BuildSharedLib(t, "testdata/null.c"), funcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if _, err := null.Call(ctx, funcs.Input{Data: []byte("a")}, funcs.Input{Data: []byte("b")}); err == nil || !strings.Contains(err.Error(), "returned NULL") {
		t.Errorf("NULL-returning library: %v", err)
	}
}

func ExampleRegistry_OpenPair() {
	reg := funcs.NewRegistry()
	f, err := reg.OpenPair("builtin:bytediff", funcs.Options{})
	if err != nil {
		panic(err)
	}
	defer f.Close()
	out, _ := f.Call(context.Background(), funcs.Input{Data: []byte("GATTACA")}, funcs.Input{Data: []byte("GACTACA")})
	fmt.Println(string(out))
	// Output: 1
}

func ExampleRegistry_RegisterPair() {
	reg := funcs.NewRegistry()
	reg.RegisterPair("samelen", func(a, b []byte) ([]byte, error) {
		return []byte(strconv.FormatBool(len(a) == len(b))), nil
	})
	f, _ := reg.OpenPair("builtin:samelen", funcs.Options{})
	out, _ := f.Call(context.Background(), funcs.Input{Data: []byte("abc")}, funcs.Input{Data: []byte("xyz")})
	fmt.Println(string(out))
	// Output: true
}
