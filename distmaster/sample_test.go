package distmaster

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rightsize/rightsize/funcs"
)

// recordingPair is an in-memory function that notes the inputs of its calls.
type recordingPair struct {
	mu    sync.Mutex
	calls int
	seen  map[string]int // a call's A and B contents, as "a|b"
	bad   []string       // inputs without their contents
}

func (p *recordingPair) Call(_ context.Context, a, b funcs.Input) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if a.Data == nil || b.Data == nil {
		p.bad = append(p.bad, a.Path+" "+b.Path)
	}
	p.seen[string(a.Data)+"|"+string(b.Data)]++
	return []byte("0"), nil
}

func (p *recordingPair) Info() funcs.Info { return funcs.Info{Kind: funcs.GoFunc, Name: "recording"} }
func (p *recordingPair) Close() error     { return nil }

// TestSampleAllPairsOnABlock: the sample pairs a few items of each set
// spread over it, as a block does, and gives an in-memory function the
// items' contents read beforehand.
func TestSampleAllPairsOnABlock(t *testing.T) {
	a, b := itemSet(t, 20), itemSet(t, 3)
	fn := &recordingPair{seen: map[string]int{}}
	s := SampleAllPairs(context.Background(), time.Minute, 1<<40, 2, a, b, fn)
	if len(fn.bad) > 0 {
		t.Fatalf("calls without the items' contents: %q", fn.bad)
	}
	if s.Calls == 0 || s.Calls > fn.calls {
		t.Fatalf("the sample counts %d calls of the %d made", s.Calls, fn.calls)
	}
	as, bs := map[string]bool{}, map[string]bool{}
	for pair := range fn.seen {
		x, y, _ := bytes.Cut([]byte(pair), []byte("|"))
		as[string(x)], bs[string(y)] = true, true
	}
	// Items 0, 2, 5, … 17 of A (8 of 20, spread), all 3 of B, and every
	// pair of them once the calls are many.
	if len(as) != 8 || len(bs) != 3 {
		t.Errorf("the calls took %d items of A and %d of B, want 8 and 3", len(as), len(bs))
	}
	if !as[string(bytes.Repeat([]byte{'a'}, 10))] || !as[string(bytes.Repeat([]byte{'a' + 17}, 27))] {
		t.Errorf("the items of A taken do not include the first (%s) and the 18th (%s)", a.Items[0].Path, a.Items[17].Path)
	}
	if fn.calls >= 24 && len(fn.seen) != 24 {
		t.Errorf("%d calls on %d pairs, want all 24 pairs of the 8×3 items", fn.calls, len(fn.seen))
	}
}
