package distmaster

import (
	"context"
	"slices"
	"testing"

	"github.com/rightsize/rightsize/funcs"
)

// TestGatedPairKeepsBlocks: the blocks a hybrid run does in the master's
// process call a function's block form (funcs.BlockPair) through the core
// gate, with the results of its cells one by one; a function without one
// is called a cell at a time.
func TestGatedPairKeepsBlocks(t *testing.T) {
	reg := funcs.NewRegistry()
	reg.RegisterPair("concat", func(a, b []byte) ([]byte, error) { return slices.Concat(a, b), nil })
	g := newCoreGate()
	for _, tc := range []struct {
		spec      string
		wantBlock bool
	}{
		{"builtin:bytediff", true},
		{"builtin:concat", false},
	} {
		p, err := reg.OpenPair(tc.spec, funcs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		gp := g.pair(p)
		bp, isBlock := gp.(funcs.BlockPair)
		if isBlock != tc.wantBlock {
			t.Fatalf("%s: gated as a block pair %v, want %v", tc.spec, isBlock, tc.wantBlock)
		}
		if !isBlock {
			continue
		}
		a := []funcs.Input{{Data: []byte("GATTACA")}, {Data: []byte("GACTACA")}}
		b := []funcs.Input{{Data: []byte("GATTACA")}, {Data: []byte("CATTAG")}, {Data: nil}}
		out := make([][]byte, len(a)*len(b))
		if err := bp.CallBlock(context.Background(), a, b, out); err != nil {
			t.Fatal(err)
		}
		for r := range a {
			for c := range b {
				want, err := p.Call(context.Background(), a[r], b[c])
				if err != nil || string(out[r*len(b)+c]) != string(want) {
					t.Errorf("%s cell (%d, %d): block %q, call %q, %v", tc.spec, r, c, out[r*len(b)+c], want, err)
				}
			}
		}
	}
}
