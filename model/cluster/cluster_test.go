package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Spec
		err  string
	}{
		{in: "slurm", want: &Spec{Kind: "slurm"}},
		{in: "wq project=blast hosts=8 port=9200", want: &Spec{Kind: "wq", Project: "blast", Hosts: 8, Port: 9200}},
		{in: "local hosts=16 cores=1 delay=0.5 dispatch=0.5", want: &Spec{Kind: "local", Hosts: 16, Cores: 1, Delay: 0.5, Dispatch: 0.5}},
		{in: "none", want: nil},
		{in: "", err: "empty"},
		{in: "pbs", err: `unknown batch type "pbs"`},
		{in: "slurm hosts", err: "want key=value"},
		{in: "slurm hosts=-1", err: "at least 0"},
		{in: "slurm cores=1.5", err: "whole number"},
		{in: "slurm colour=red", err: `unknown setting "colour"`},
		{in: "slurm delay=1", err: "kind local only"},
		{in: "wq port=70000", err: "not a port"},
	} {
		got, err := ParseSpec(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSpec(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("ParseSpec(%q): %v", tc.in, err)
		case (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want:
			t.Errorf("ParseSpec(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestReadSpecFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		text string
		want *Spec
		err  string
	}{
		{text: "# my cluster\nkind = sge\n\ncores = 4  # per node\n", want: &Spec{Kind: "sge", Cores: 4}},
		{text: "kind = none\n", want: nil},
		{text: "kind = slurm\nhosts 4\n", err: "cluster:2: \"hosts 4\": want key = value"},
		{text: "kind = slurm\nspeed = 3\n", err: "cluster:2: unknown setting"},
		{text: "hosts = 3\n", err: "no kind = line"},
	} {
		path := filepath.Join(dir, "cluster")
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadSpecFile(path)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %+v, %v; want an error with %q", tc.text, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.text, err)
		case (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want:
			t.Errorf("%q: %+v, want %+v", tc.text, got, tc.want)
		}
	}
	if sp, err := ReadSpecFile(filepath.Join(dir, "missing")); sp != nil || err != nil {
		t.Errorf("missing file: %+v, %v; want nothing", sp, err)
	}
}

// options returns Options that see only env, the config file text (if
// any) and an empty PATH of batch systems.
func options(t *testing.T, env map[string]string, file string) Options {
	t.Helper()
	cfg := t.TempDir()
	if file != "" {
		if err := os.WriteFile(filepath.Join(cfg, "cluster"), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Options{
		Env:       func(k string) string { return env[k] },
		ConfigDir: cfg, CacheDir: t.TempDir(),
		Bin:      t.TempDir(), // no sinfo, qstat or condor_status here
		Catalogs: []string{},
	}
}

func TestFindPrecedence(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		kind      string
		env, file string
		want      string // kind, or "" for none
		named     string
		hosts     float64
	}{
		{name: "nothing", want: ""},
		{name: "env", env: "sge hosts=3", want: "sge", named: EnvVar, hosts: 3},
		{name: "file", file: "kind = condor\nhosts = 5\n", want: "condor", named: "cluster", hosts: 5},
		{name: "env over file", env: "slurm hosts=2", file: "kind = condor\n", want: "slurm", named: EnvVar, hosts: 2},
		{name: "none stops detection", env: "none", file: "kind = condor\n", want: ""},
		{name: "-T over env", kind: "sge", env: "slurm hosts=2", want: "sge", named: "-T", hosts: 0},
		{name: "-T with env's settings", kind: "slurm", env: "slurm hosts=2", want: "slurm", named: "-T, with the settings of " + EnvVar, hosts: 2},
		{name: "-T despite none", kind: "local", env: "none", want: "local", named: "-T"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, map[string]string{EnvVar: tc.env}, tc.file)
			o.Kind = tc.kind
			c, err := Find(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if c != nil {
					t.Fatalf("found %+v, want none", c)
				}
				return
			}
			if c == nil || c.Kind != tc.want || !strings.Contains(c.Named, tc.named) {
				t.Fatalf("found %+v, want %s named by %q", c, tc.want, tc.named)
			}
			if tc.hosts > 0 && (c.Hosts.V != tc.hosts || c.Hosts.Assumed()) {
				t.Errorf("hosts %+v, want %v from the setting", c.Hosts, tc.hosts)
			}
			if tc.kind == "" && c.Dispatch.Source != "" {
				t.Errorf("dispatch %+v measured without Probe", c.Dispatch)
			}
		})
	}
}

func TestParseListings(t *testing.T) {
	for _, tc := range []struct {
		name         string
		parse        func(string) (int, int, error)
		out          string
		hosts, cores int
		err          string
	}{
		{"sinfo", ParseSinfo, "vm 0/2/0/2\n", 1, 2, ""},
		{"sinfo busy and partitions", ParseSinfo, "a 4/0/0/4\nb 1/3/0/4\nb 1/3/0/4\nc 0/8/0/8\nd 0/4/0/4\n", 3, 4, ""},
		{"sinfo empty", ParseSinfo, "", 0, 0, "no nodes"},
		{"sinfo garbage", ParseSinfo, "vm 2\n", 0, 0, "want NODE A/I/O/T"},
		{"qstat -g c", ParseQstatGC, `CLUSTER QUEUE                   CQLOAD   USED    RES  AVAIL  TOTAL aoACDS  cdsuE  
--------------------------------------------------------------------------------
all.q                             0.04      0      0      2      2      0      0 
long.q                            0.50      6      0      10     16      0      0 
`, 12, 1, ""},
		{"qstat -g c garbage", ParseQstatGC, "error: no qmaster\n", 0, 0, "header"},
		{"condor_status", ParseCondorStatus, "1 Unclaimed\n1 Claimed\n4 Unclaimed\n2 Unclaimed\n", 3, 2, ""},
		{"condor_status empty", ParseCondorStatus, "\n", 0, 0, "no slots"},
	} {
		h, c, err := tc.parse(tc.out)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %d %d %v, want error %q", tc.name, h, c, err, tc.err)
			}
			continue
		}
		if err != nil || h != tc.hosts || c != tc.cores {
			t.Errorf("%s: %d hosts × %d cores, %v; want %d × %d", tc.name, h, c, err, tc.hosts, tc.cores)
		}
	}
}

func TestParseTestOnly(t *testing.T) {
	loc := time.FixedZone("here", 3600)
	got, err := ParseTestOnly("sbatch: Job 36 to start at 2026-11-25T00:15:51 using 1 processors on nodes vm in partition debug\n", loc)
	if want := time.Date(2026, 11, 25, 0, 15, 51, 0, loc); err != nil || !got.Equal(want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if _, err := ParseTestOnly("sbatch: error: invalid partition specified\n", loc); err == nil {
		t.Error("an error message parsed as a start time")
	}
}

func TestDispatchCache(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now := base
	o := options(t, map[string]string{EnvVar: "local hosts=4 delay=0.05"}, "")
	o.Now = func() time.Time { return now }

	// Nothing measured, no probe: assumed.
	c, err := Find(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Dispatch.Assumed() || c.Dispatch.V != assumedDispatch["local"] {
		t.Errorf("dispatch without measurement: %+v, want assumed %v", c.Dispatch, assumedDispatch["local"])
	}
	// A probe: a real job through the local driver, held 50 ms.
	o.Probe = true
	if c, err = Find(ctx, o); err != nil {
		t.Fatal(err)
	}
	if c.Dispatch.Source != "probe job" || c.Dispatch.V < 0.05 {
		t.Errorf("probed dispatch: %+v, want at least the 50 ms delay", c.Dispatch)
	}
	probed := c.Dispatch.V
	// Twenty minutes on, the cache answers, with its age.
	now = base.Add(20 * time.Minute)
	if c, err = Find(ctx, o); err != nil {
		t.Fatal(err)
	}
	if c.Dispatch.V != probed || !strings.Contains(c.Dispatch.Describe(now), "probe job, 20 min old") {
		t.Errorf("cached dispatch: %+v (%s), want %v from the probe, 20 min old", c.Dispatch, c.Dispatch.Describe(now), probed)
	}
	// Three hours on, without probes, the stale figure still serves.
	now = base.Add(3 * time.Hour)
	o.Probe = false
	if c, err = Find(ctx, o); err != nil {
		t.Fatal(err)
	}
	if c.Dispatch.V != probed || !strings.Contains(c.Dispatch.Describe(now), "3 h old") {
		t.Errorf("stale dispatch: %s, want the old probe's", c.Dispatch.Describe(now))
	}
	// A run's own measurement replaces it; bandwidth likewise.
	if err := SaveDispatch(o, "local", 0.25); err != nil {
		t.Fatal(err)
	}
	if err := SaveBandwidth(o, "local", 50e6); err != nil {
		t.Fatal(err)
	}
	if c, err = Find(ctx, o); err != nil {
		t.Fatal(err)
	}
	if c.Dispatch.V != 0.25 || c.Dispatch.Source != "measured in a run" || c.Bandwidth.V != 50e6 || c.Bandwidth.Assumed() {
		t.Errorf("after a run: dispatch %+v, bandwidth %+v", c.Dispatch, c.Bandwidth)
	}
	// A damaged cache is ignored.
	if err := os.WriteFile(filepath.Join(o.CacheDir, "cluster.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = Find(ctx, o); err != nil || !c.Dispatch.Assumed() {
		t.Errorf("damaged cache: %+v, %v; want assumed values", c, err)
	}
}

// TestFindRealBatchSystems finds and measures the SLURM and Grid Engine
// that scripts/slurm.sh and scripts/sge.sh run here.
func TestFindRealBatchSystems(t *testing.T) {
	for _, tc := range []struct{ kind, listing string }{{"slurm", "sinfo"}, {"sge", "qstat -g c"}} {
		t.Run(tc.kind, func(t *testing.T) {
			testutil.NeedBatchSystem(t, tc.kind)
			o := Options{Probe: true, CacheDir: t.TempDir(), ConfigDir: t.TempDir(), Env: func(string) string { return "" }}
			// Detected with nothing named, and measured.
			c, err := Find(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if c == nil || !strings.HasPrefix(c.Named, "detected: ") {
				t.Fatalf("detection found %+v, want a batch system that answers", c)
			}
			o.Kind = tc.kind
			if c, err = Find(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			if c.Hosts.V < 1 || c.Hosts.Source != tc.listing || c.CoresPerHost.V < 1 {
				t.Errorf("width: %+v × %+v, want at least one host from %s", c.Hosts, c.CoresPerHost, tc.listing)
			}
			if c.Dispatch.Source != "probe job" || c.Dispatch.V <= 0 || c.Submit.V <= 0 {
				t.Errorf("dispatch %+v, submit %+v: want measured by a probe job", c.Dispatch, c.Submit)
			}
		})
	}
}
