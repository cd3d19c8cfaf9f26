package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		name        string
		done, total int64
		rate        float64
		status      string
		want        []string
		wantNot     []string
	}{
		{name: "half", done: 50, total: 100, rate: 10, want: []string{"[", "50/100 cells", "50.0%", "10 cells/s", "ETA 5s"}},
		{name: "unknown rate", done: 0, total: 100, rate: 0, want: []string{"0/100", "ETA -"}},
		{name: "finished", done: 100, total: 100, rate: 10, want: []string{"100/100", " in "}, wantNot: []string{"ETA"}},
		{name: "no total", done: 7, total: 0, rate: 2, want: []string{"7 cells", "2.00 cells/s"}, wantNot: []string{"["}},
		{name: "status", done: 1, total: 4, rate: 1, status: "running 2, failed 1", want: []string{"running 2, failed 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Format(tt.done, tt.total, "cells", tt.rate, 10*time.Second, tt.status, 120)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("Format = %q, want it to contain %q", got, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("Format = %q, want it not to contain %q", got, w)
				}
			}
			if len(got) > 120 {
				t.Errorf("Format is %d columns wide, want at most 120", len(got))
			}
		})
	}
}

func TestFormatNarrow(t *testing.T) {
	got := Format(5, 10, "cells", 1, time.Second, "a long status that does not fit", 30)
	if len(got) >= 30 {
		t.Errorf("Format = %q (%d columns), want fewer than 30", got, len(got))
	}
}

func TestInertOnNonTerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "cells", 10)
	if b.Active() {
		t.Fatal("bar on a bytes.Buffer is active")
	}
	b.Add(3)
	b.SetStatus("x")
	w := b.Writer(&buf)
	w.Write([]byte("result\n"))
	b.Stop()
	if got := buf.String(); got != "result\n" {
		t.Errorf("output = %q, want only the result line", got)
	}
}
