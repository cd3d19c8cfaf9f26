package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/workqueue/factory"
)

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy(strings.NewReader(`# the seed's example
max_workers: 2000
distribution: proj1=500, proj2.*=1500

max_change: 30
default_capacity: 10
billing_cycle: 20m
`), "pool.conf")
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxWorkers != 2000 || p.MaxChange != 30 || p.DefaultCapacity != 10 || p.BillingCycle != 20*time.Minute {
		t.Errorf("parsed %+v", p)
	}
	if p.Decision != factory.D7 {
		t.Errorf("decision with a billing cycle %v, want D7", p.Decision)
	}
	if len(p.Distribution) != 2 || p.Distribution[1].Source != "proj2.*" || p.Distribution[1].Workers != 1500 {
		t.Errorf("distribution %+v", p.Distribution)
	}
	if p.shareOf("proj2-A") != 1 || p.shareOf("xproj1") != -1 || p.shareOf("proj1") != 0 {
		t.Error("patterns not anchored")
	}

	p, err = ParsePolicy(strings.NewReader("max_workers: 5\ndistribution: a=1\n"), "p")
	if err != nil {
		t.Fatal(err)
	}
	if p.Decision != factory.D6 || p.MaxChange != 60 || p.DefaultCapacity != 20 || p.BillingCycle != 0 {
		t.Errorf("defaults %+v", p)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"max_workers: 5\n", "pool.conf: distribution missing"},
		{"distribution: a=1\n", "pool.conf: max_workers missing"},
		{"max_workers: 5\n\ndistribution a=1\n", "pool.conf:3: want name: value"},
		{"max_workers: zero\n", `pool.conf:1: max_workers: "zero" is not a whole number of at least 1`},
		{"max_workers: 0\n", `pool.conf:1: max_workers:`},
		{"max_workers: 5\nmax_workers: 6\n", "pool.conf:2: max_workers given again (first at line 1)"},
		{"max_worker: 5\n", "pool.conf:1: max_worker: unknown setting"},
		{"distribution: a(=1\n", "pool.conf:1: distribution: entry \"a(=1\": error parsing regexp"},
		{"distribution: a=x\n", `pool.conf:1: distribution: entry "a=x"`},
		{"distribution: a\n", `pool.conf:1: distribution: entry "a": want regex=workers`},
		{"distribution: ,\n", "pool.conf:1: distribution: no entries"},
		{"max_change: -1\n", "pool.conf:1: max_change:"},
		{"billing_cycle: soon\n", "pool.conf:1: billing_cycle:"},
		{"decision: D9\n", `pool.conf:1: decision: unknown decision "D9"`},
		{"max_workers: 5\ndistribution: a=1\ndecision: D7\n", "pool.conf: line 3: decision D7 needs a billing_cycle"},
	} {
		_, err := ParsePolicy(strings.NewReader(tc.file), "pool.conf")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q…", tc.file, err, tc.want)
		}
	}
}
