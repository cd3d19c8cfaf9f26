package makeflow

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	present := map[string]bool{"in.txt": true, "data/x": true}
	exists := func(name string) bool { return present[name] }
	tests := []struct {
		name string
		src  string
		want []string // file:line:col: message prefixes, in order
	}{
		{"fine", "a: in.txt\n\tcat in.txt > a\nb: a data/x\n\tcat a > b\n", nil},
		{"missing input", "a: in.txt nope.txt\n\ttrue\nb: nope.txt\n\ttrue\n", []string{
			"c.mf:1:11: input nope.txt does not exist and no rule makes it",
			"c.mf:3:4: input nope.txt does not exist",
		}},
		{"a typo of a made file", "part.0:\n\ttouch part.0\nout: part.O\n\tcat part.O > out\n", []string{
			"c.mf:3:6: input part.O does not exist and no rule makes it (did you mean part.0, which a rule makes?)",
		}},
		{"two rules make one file", "a:\n\ttouch a\nb a:\n\ttouch a b\n", []string{
			"c.mf:3:3: a is also made by the rule at c.mf:1:1",
		}},
		{"a rule reads what it makes", "a: a\n\ttrue\n", []string{
			"c.mf:1:1: dependency cycle: the rule reads a, which it makes itself",
		}},
		{"two-rule cycle", "a: b\n\ttrue\nb: a\n\ttrue\nc: a\n\ttrue\n", []string{
			"c.mf:1:1: dependency cycle: this rule makes a, which the rule at line 3 reads to make b, which this rule reads",
		}},
		{"three-rule cycle behind a good rule", "x: in.txt\n\ttrue\np: r x\n\ttrue\nq: p\n\ttrue\nr: q\n\ttrue\n", []string{
			"c.mf:3:1: dependency cycle: this rule makes p, which the rule at line 5 reads to make q, which the rule at line 7 reads to make r, which this rule reads",
		}},
		{"every kind at once", "a: a\n\ttrue\nb: gone\n\ttrue\nb:\n\ttrue\n", []string{
			"c.mf:1:1: dependency cycle",
			"c.mf:3:4: input gone does not exist",
			"c.mf:5:1: b is also made by",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Parse("c.mf", []byte(tt.src), []string{})
			if err != nil {
				t.Fatal(err)
			}
			err = w.Check(exists)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Check = %v, want an ErrorList", err)
			}
			if len(list) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(list), len(tt.want), err)
			}
			for i, e := range list {
				if !strings.HasPrefix(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %q\nwant prefix %q", i, e.Error(), tt.want[i])
				}
			}
		})
	}
}

func TestCheckWithoutFileSystem(t *testing.T) {
	w, err := Parse("c.mf", []byte("a: anything\n\ttrue\n"), []string{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Check(nil); err != nil {
		t.Errorf("Check(nil) = %v; inputs should not be looked for", err)
	}
}

func TestNewSchedulerRejectsCycles(t *testing.T) {
	w, err := Parse("c.mf", []byte("a: b\n\ttrue\nb: a\n\ttrue\n"), []string{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewScheduler(w, SchedulerConfig{Local: Limits{Jobs: 1}}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("NewScheduler = %v, want a cycle error", err)
	}
}
