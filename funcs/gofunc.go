package funcs

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"time"
)

// inProcess calls an in-memory function (Go or shared library) with the
// options' timeout, turning errors and panics into *CallError.
type inProcess struct {
	info    Info
	timeout time.Duration
}

// call runs f(args) and reports its failure as a *CallError. With a timeout
// the call runs on its own goroutine; when it expires the goroutine is
// abandoned, because Go cannot stop a function from outside.
func (p inProcess) call(ctx context.Context, inputs []Input, f func(args [][]byte) ([]byte, error)) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	args, err := p.args(inputs)
	if err != nil {
		return nil, err
	}
	if p.direct(ctx) {
		return p.guard(f, args)
	}
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := p.guard(f, args)
		done <- result{out, err}
	}()
	var expired <-chan time.Time
	if p.timeout > 0 {
		t := time.NewTimer(p.timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case r := <-done:
		return r.out, r.err
	case <-expired:
		return nil, &CallError{Func: p.info.Name, ExitCode: -1, TimedOut: true, Timeout: p.timeout}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// direct reports whether a call with ctx runs on the caller's goroutine:
// when there is no timeout and ctx cannot be cancelled.
func (p inProcess) direct(ctx context.Context) bool {
	return p.timeout <= 0 && ctx.Done() == nil
}

// args reads the inputs of a call.
func (p inProcess) args(inputs []Input) ([][]byte, error) {
	args := make([][]byte, len(inputs))
	for i, in := range inputs {
		b, err := readInput(in)
		if err != nil {
			return nil, &CallError{Func: p.info.Name, ExitCode: -1, Err: fmt.Errorf("read input: %w", err)}
		}
		args[i] = b
	}
	return args, nil
}

// guard calls f, converting a panic or an error into a *CallError.
func (p inProcess) guard(f func(args [][]byte) ([]byte, error), args [][]byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &CallError{Func: p.info.Name, ExitCode: -1, Err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
		}
	}()
	out, err = f(args)
	if err != nil {
		if _, ok := err.(*CallError); !ok {
			err = &CallError{Func: p.info.Name, ExitCode: -1, Err: err}
		}
	}
	return out, err
}

type goPair struct {
	inProcess
	f PairFunc
}

// NewGoPair wraps a Go function as a Pair. name is used in messages.
func NewGoPair(name string, f PairFunc, opts Options) Pair {
	return &goPair{inProcess{Info{Kind: GoFunc, Name: name}, opts.Timeout}, f}
}

func (g *goPair) Info() Info   { return g.info }
func (g *goPair) Close() error { return nil }
func (g *goPair) Call(ctx context.Context, a, b Input) ([]byte, error) {
	return g.call(ctx, []Input{a, b}, func(args [][]byte) ([]byte, error) { return g.f(args[0], args[1]) })
}

type goBlockPair struct {
	goPair
	block PairBlockFunc
}

// NewGoBlockPair wraps a Go function and its block form (which must give the
// same results, cell for cell) as a BlockPair. A timeout bounds each cell,
// so with one the function is returned as a plain Pair, called a cell at a
// time.
func NewGoBlockPair(name string, f PairFunc, block PairBlockFunc, opts Options) Pair {
	p := goPair{inProcess{Info{Kind: GoFunc, Name: name}, opts.Timeout}, f}
	if opts.Timeout > 0 {
		return &p
	}
	return &goBlockPair{p, block}
}

func (g *goBlockPair) CallBlock(ctx context.Context, a, b []Input, out [][]byte) error {
	if len(out) != len(a)*len(b) {
		return fmt.Errorf("%s: %d results for a %d×%d block", g.info.Name, len(out), len(a), len(b))
	}
	// results is set only by a call that returns without error; a call
	// abandoned when ctx is cancelled may set it later, when no one reads it.
	var results [][]byte
	_, err := g.call(ctx, slices.Concat(a, b), func(args [][]byte) ([]byte, error) {
		rs, err := g.block(args[:len(a)], args[len(a):])
		if err == nil && len(rs) != len(out) {
			err = fmt.Errorf("%d results for a %d×%d block", len(rs), len(a), len(b))
		}
		results = rs
		return nil, err
	})
	if err != nil {
		return err
	}
	copy(out, results)
	return nil
}

type goCell struct {
	inProcess
	f CellFunc
}

// NewGoCell wraps a Go function as a Cell. name is used in messages.
func NewGoCell(name string, f CellFunc, opts Options) Cell {
	return &goCell{inProcess{Info{Kind: GoFunc, Name: name}, opts.Timeout}, f}
}

func (g *goCell) Info() Info   { return g.info }
func (g *goCell) Close() error { return nil }
func (g *goCell) Call(ctx context.Context, x, y, d Input) ([]byte, error) {
	return g.call(ctx, []Input{x, y, d}, func(args [][]byte) ([]byte, error) { return g.f(args[0], args[1], args[2]) })
}
