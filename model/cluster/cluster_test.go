package cluster

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/model/place"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Spec
		err  string
	}{
		{in: "slurm", want: &Spec{Kind: "slurm"}},
		{in: "  sge  ", want: &Spec{Kind: "sge"}},
		{in: "slurm cores=4", want: &Spec{Kind: "slurm", Cores: 4}},
		{in: "wq project=blast hosts=8 port=9123", want: &Spec{Kind: "wq", Project: "blast", Hosts: 8, Port: 9123}},
		{in: "wq project=blast catalog=cat.example.org:9097", want: &Spec{Kind: "wq", Project: "blast", Catalog: "cat.example.org:9097"}},
		{in: "condor dispatch=45.5", want: &Spec{Kind: "condor", Dispatch: 45.5}},
		{in: "local hosts=16 cores=1 delay=0.5 dispatch=0.5", want: &Spec{Kind: "local", Hosts: 16, Cores: 1, Delay: 0.5, Dispatch: 0.5}},
		{in: "none", want: nil},
		{in: "", err: "empty"},
		{in: "pbs", err: `unknown batch type "pbs"`},
		{in: "none hosts=2", err: "none takes no settings"},
		{in: "slurm hosts", err: "want key=value"},
		{in: "slurm hosts=-1", err: "at least 0"},
		{in: "slurm hosts=many", err: "want a number"},
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
	path := filepath.Join(dir, "cluster")
	for _, tc := range []struct {
		text string
		want *Spec
		err  string // the whole message after path
	}{
		{text: "# my cluster\nkind = sge\n\ncores = 4  # per node\n", want: &Spec{Kind: "sge", Cores: 4}},
		{text: "kind=wq\nproject = blast\nport = 9123\nhosts = 8\n", want: &Spec{Kind: "wq", Project: "blast", Port: 9123, Hosts: 8}},
		{text: "kind = none\n", want: nil},
		{text: "kind = slurm\nhosts 4\n", err: `:2: "hosts 4": want key = value`},
		{text: "kind = slurm\n\n# speed\nspeed = 3\n", err: `:4: unknown setting "speed" (known: project, port, catalog, hosts, cores, dispatch, delay)`},
		{text: "kind = pbs\n", err: `:1: unknown batch type "pbs" (known: wq, slurm, sge, condor, local, or none)`},
		{text: "kind = slurm\ncores = four\n", err: ":2: cores=four: want a number, at least 0"},
		{text: "hosts = 3\n", err: ": no kind = line (wq, slurm, sge, condor, local or none)"},
		{text: "kind = none\nhosts = 3\n", err: ": none takes no settings"},
	} {
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadSpecFile(path)
		switch {
		case tc.err != "":
			if err == nil || err.Error() != path+tc.err {
				t.Errorf("%q: %+v, %v; want the error %s%s", tc.text, got, err, path, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.text, err)
		case (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want:
			t.Errorf("%q: %+v, want %+v", tc.text, got, tc.want)
		}
	}
	if sp, err := ReadSpecFile(filepath.Join(dir, "missing")); sp != nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %+v, %v; want ErrNotExist", sp, err)
	}
}

// options returns Options that see only env, the config file text (if
// any), the batch system commands in bin (none if ""), no catalog, and a
// cache of their own.
func options(t *testing.T, env map[string]string, file, bin string) Options {
	t.Helper()
	cfg := t.TempDir()
	if file != "" {
		if err := os.WriteFile(filepath.Join(cfg, "cluster"), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if bin == "" {
		bin = t.TempDir() // no sinfo, qstat or condor_status here
	}
	return Options{
		Env:       func(k string) string { return env[k] },
		ConfigDir: cfg, CacheDir: t.TempDir(),
		Bin:      bin,
		Catalogs: []string{},
	}
}

// fakeBin returns a directory of batch system commands, each a script
// printing its text (or failing, for text "FAIL").
func fakeBin(t *testing.T, cmds map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range cmds {
		body := "cat <<'EOF'\n" + text + "EOF"
		if text == "FAIL" {
			body = "echo 'error: cannot reach the controller' >&2; exit 1"
		}
		testutil.WriteScript(t, dir, name, body)
	}
	return dir
}

// Listings captured on the test machine (scripts/slurm.sh, scripts/sge.sh).
const (
	sinfoSample   = "vm 0/2/0/2\n"
	qstatGCSample = `CLUSTER QUEUE                   CQLOAD   USED    RES  AVAIL  TOTAL aoACDS  cdsuE  
--------------------------------------------------------------------------------
all.q                             2.11      0      0      2      2      0      0 
`
	testOnlySample = "sbatch: Job 270 to start at 2026-11-25T01:16:57 using 1 processors on nodes vm in partition debug\n"
)

func TestFindPrecedence(t *testing.T) {
	ctx := context.Background()
	slurmBin := map[string]string{"sinfo": sinfoSample}
	for _, tc := range []struct {
		name      string
		kind      string
		env, file string
		bin       map[string]string // fake batch commands
		want      string            // kind, or "" for none
		named     string            // a prefix of Named ("FILE" for the file's path)
		hosts     float64
		err       string
	}{
		{name: "nothing", want: ""},
		{name: "env", env: "sge hosts=3", want: "sge", named: EnvVar, hosts: 3},
		{name: "file", file: "kind = condor\nhosts = 5\n", want: "condor", named: "FILE", hosts: 5},
		{name: "env over file", env: "slurm hosts=2", file: "kind = condor\n", want: "slurm", named: EnvVar, hosts: 2},
		{name: "env over detection", env: "condor hosts=2", bin: slurmBin, want: "condor", named: EnvVar, hosts: 2},
		{name: "file over detection", file: "kind = sge\n", bin: slurmBin, want: "sge", named: "FILE"},
		{name: "env none stops detection", env: "none", file: "kind = condor\n", bin: slurmBin, want: ""},
		{name: "file none stops detection", file: "kind = none\n", bin: slurmBin, want: ""},
		{name: "-T over env", kind: "sge", env: "slurm hosts=2", want: "sge", named: "-T", hosts: 0},
		{name: "-T over file", kind: "condor", file: "kind = sge\n", want: "condor", named: "-T"},
		{name: "-T with env's settings", kind: "slurm", env: "slurm hosts=2", want: "slurm", named: "-T, with the settings of " + EnvVar, hosts: 2},
		{name: "-T despite none", kind: "local", env: "none", want: "local", named: "-T"},
		{name: "-T despite file none", kind: "local", file: "kind = none\n", want: "local", named: "-T"},
		{name: "detected", bin: slurmBin, want: "slurm", named: "detected: sinfo answers", hosts: 1},
		{name: "bad -T", kind: "pbs", err: `unknown batch type "pbs" (known: wq, slurm, sge, condor, local)`},
		{name: "bad env", env: "slurm nodes=3", err: `RIGHTSIZE_CLUSTER: unknown setting "nodes"`},
		{name: "bad env despite -T", kind: "slurm", env: "pbs", err: `RIGHTSIZE_CLUSTER: unknown batch type "pbs"`},
		{name: "bad file", file: "kind = slurm\nnodes: 3\n", err: `cluster:2: "nodes: 3": want key = value`},
		{name: "bad file unread with env", env: "sge", file: "nonsense\n", want: "sge", named: EnvVar},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := ""
			if tc.bin != nil {
				bin = fakeBin(t, tc.bin)
			}
			o := options(t, map[string]string{EnvVar: tc.env}, tc.file, bin)
			o.Kind = tc.kind
			c, err := Find(ctx, o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("found %+v, %v; want an error with %q", c, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if c != nil {
					t.Fatalf("found %+v, want none", c)
				}
				return
			}
			named := tc.named
			if named == "FILE" {
				named = filepath.Join(o.ConfigDir, "cluster")
			}
			if c == nil || c.Kind != tc.want || !strings.HasPrefix(c.Named, named) {
				t.Fatalf("found %+v, want %s named by %q", c, tc.want, named)
			}
			if tc.hosts > 0 && (c.Hosts.V != tc.hosts || c.Hosts.Assumed()) {
				t.Errorf("hosts %+v, want %v measured or set", c.Hosts, tc.hosts)
			}
			if c.Dispatch.Source != "" {
				t.Errorf("dispatch %+v measured without Probe", c.Dispatch)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	condorStatus := "2 Unclaimed\n2 Claimed\n4 Unclaimed\n"
	for _, tc := range []struct {
		name  string
		bin   map[string]string
		want  string // kind, "" for none
		named string
		hosts float64
		cores float64
		src   string // Hosts.Source
	}{
		{name: "nothing installed"},
		{name: "slurm", bin: map[string]string{"sinfo": sinfoSample, "qstat": qstatGCSample},
			want: "slurm", named: "detected: sinfo answers", hosts: 1, cores: 2, src: "sinfo"},
		{name: "slurm busy", bin: map[string]string{"sinfo": "a 4/0/0/4\nb 8/0/0/8\nc 2/0/0/2\n"},
			want: "slurm", named: "detected: sinfo answers", hosts: 3, cores: 4, src: "sinfo: no free cores now; every responding host"},
		{name: "slurm down, sge", bin: map[string]string{"sinfo": "FAIL", "qstat": qstatGCSample},
			want: "sge", named: "detected: qstat answers", hosts: 2, cores: 1, src: "qstat -g c"},
		{name: "slurm without nodes, condor", bin: map[string]string{"sinfo": "", "condor_status": condorStatus},
			want: "condor", named: "detected: condor_status answers", hosts: 2, cores: 2, src: "condor_status"},
		{name: "all fail", bin: map[string]string{"sinfo": "FAIL", "qstat": "FAIL", "condor_status": "FAIL"}},
		{name: "a qstat of another kind", bin: map[string]string{"qstat": "Job id  Name  User\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, nil, "", fakeBin(t, tc.bin))
			c, err := Find(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if c != nil {
					t.Fatalf("found %+v, want none", c)
				}
				return
			}
			if c == nil || c.Kind != tc.want || c.Named != tc.named {
				t.Fatalf("found %+v, want %s named %q", c, tc.want, tc.named)
			}
			if c.Hosts != (place.Value{V: tc.hosts, Source: tc.src}) || c.CoresPerHost != (place.Value{V: tc.cores, Source: tc.src}) {
				t.Errorf("width %+v × %+v, want %v × %v from %q", c.Hosts, c.CoresPerHost, tc.hosts, tc.cores, tc.src)
			}
		})
	}
}

// TestSpecOverridesListing: the user's hosts and cores win over the
// batch system's listing, and say so.
func TestSpecOverridesListing(t *testing.T) {
	o := options(t, map[string]string{EnvVar: "slurm cores=16"}, "", fakeBin(t, map[string]string{"sinfo": sinfoSample}))
	c, err := Find(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hosts != (place.Value{V: 1, Source: "sinfo"}) || c.CoresPerHost != (place.Value{V: 16, Source: EnvVar}) {
		t.Errorf("width %+v × %+v, want 1 host from sinfo × 16 cores from %s", c.Hosts, c.CoresPerHost, EnvVar)
	}
}

func TestParseListings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func(string) (span, error)
		out   string
		want  span
		err   string
	}{
		{"sinfo", parseSinfo, sinfoSample, span{Hosts: 1, Cores: 2}, ""},
		{"sinfo busy and partitions", parseSinfo, "a 4/0/0/4\nb 1/3/0/4\nb 1/3/0/4\nc 0/8/0/8\nd 0/4/0/4\n", span{Hosts: 3, Cores: 4}, ""},
		{"sinfo down and drained", parseSinfo, "a 0/0/4/4\nb 0/2/0/2\nc 2/0/2/4\n", span{Hosts: 1, Cores: 2}, ""},
		{"sinfo all busy", parseSinfo, "a 4/0/0/4\nb 8/0/0/8\nc 0/0/4/4\n", span{Hosts: 2, Cores: 4, Busy: true}, ""},
		{"sinfo all down", parseSinfo, "a 0/0/4/4\n", span{Busy: true}, ""},
		{"sinfo empty", parseSinfo, "", span{}, "no nodes"},
		{"sinfo garbage", parseSinfo, "vm 2\n", span{}, "want NODE A/I/O/T"},
		{"sinfo not numbers", parseSinfo, "vm a/b/c/d\n", span{}, "want NODE A/I/O/T"},
		{"qstat -g c", parseQstatGC, qstatGCSample, span{Hosts: 2, Cores: 1}, ""},
		{"qstat -g c queues", parseQstatGC, `CLUSTER QUEUE                   CQLOAD   USED    RES  AVAIL  TOTAL aoACDS  cdsuE  
--------------------------------------------------------------------------------
all.q                             0.04      0      0      2      2      0      0 
long.q                            0.50      6      0     10     16      0      0 
`, span{Hosts: 12, Cores: 1}, ""},
		{"qstat -g c without RES, full", parseQstatGC, `CLUSTER QUEUE                   CQLOAD   USED  AVAIL  TOTAL aoACDS  cdsuE  
--------------------------------------------------------------------------------
all.q                             1.00      8      0      8      0      0 
`, span{Hosts: 8, Cores: 1, Busy: true}, ""},
		{"qstat -g c no qmaster", parseQstatGC, "error: unable to contact qmaster\n", span{}, "header"},
		{"qstat -g c no queues", parseQstatGC, "CLUSTER QUEUE CQLOAD USED RES AVAIL TOTAL aoACDS cdsuE\n----\n", span{}, "no queues"},
		{"qstat -g c short line", parseQstatGC, "CLUSTER QUEUE CQLOAD USED RES AVAIL TOTAL aoACDS cdsuE\nall.q 0.1 0\n", span{}, "no AVAIL"},
		{"condor_status", parseCondorStatus, "1 Unclaimed\n1 Claimed\n4 Unclaimed\n2 Unclaimed\n2 Owner\n", span{Hosts: 3, Cores: 2}, ""},
		{"condor_status all claimed", parseCondorStatus, "8 Claimed\n8 Claimed\n1 Owner\n", span{Hosts: 2, Cores: 8, Busy: true}, ""},
		{"condor_status empty", parseCondorStatus, "\n", span{}, "no slots"},
		{"condor_status garbage", parseCondorStatus, "Cpus = 4\n", span{}, "want CPUS STATE"},
	} {
		got, err := tc.parse(tc.out)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %+v, %v; want error %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestParseTestOnly(t *testing.T) {
	loc := time.FixedZone("here", 3600)
	for _, tc := range []struct {
		out  string
		want time.Time
		err  string
	}{
		{out: testOnlySample, want: time.Date(2026, 11, 25, 1, 16, 57, 0, loc)},
		{out: "sbatch: Job 36 to start at 2026-11-24T10:00:00 using 4 processors on nodes n[1-2] in partition batch", want: time.Date(2026, 11, 24, 10, 0, 0, 0, loc)},
		// SLURM's end of time: it cannot say when.
		{out: "sbatch: Job 1559 to start at 18359-02-25T19:15:57 using 2 processors on nodes vm in partition debug", want: shape.Never},
		{out: "sbatch: error: invalid partition specified: foo\n", err: "no start time"},
		{out: "sbatch: Job 1 to start at soon using 1 processors\n", err: `cannot parse "soon"`},
	} {
		got, err := shape.ParseTestOnly(tc.out, loc)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, %v; want an error with %q", tc.out, got, err, tc.err)
			}
		case err != nil || !got.Equal(tc.want):
			t.Errorf("%q: %v, %v; want %v", tc.out, got, err, tc.want)
		}
	}
}

func TestDispatchCache(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		cache   string        // cluster.json, "" for none
		age     time.Duration // how long after base Find runs
		probe   bool
		v       float64 // want; -1 for a probe's (any positive)
		source  string
		describ string // want Dispatch.Describe(now)
	}{
		{name: "nothing, no probe", v: assumedDispatch["local"], describ: "assumed: nothing measured yet"},
		{name: "nothing, probe", probe: true, v: -1, source: "probe job", describ: "probe job"},
		{name: "fresh probe", cache: `{"local": {"dispatch_s": 0.3, "dispatch_at": "2026-11-24T12:00:00Z", "dispatch_by": "probe job"}}`,
			age: 20 * time.Minute, probe: true, v: 0.3, source: "probe job", describ: "probe job, 20 min old"},
		{name: "fresh run", cache: `{"local": {"dispatch_s": 0.4, "dispatch_at": "2026-11-24T12:00:00Z", "dispatch_by": "measured in a run"}}`,
			age: 59 * time.Minute, v: 0.4, source: "measured in a run", describ: "measured in a run, 59 min old"},
		{name: "stale, no probe", cache: `{"local": {"dispatch_s": 0.3, "dispatch_at": "2026-11-24T12:00:00Z", "dispatch_by": "probe job"}}`,
			age: 3 * time.Hour, v: 0.3, source: "probe job", describ: "probe job, 3 h old"},
		{name: "stale, probe", cache: `{"local": {"dispatch_s": 0.3, "dispatch_at": "2026-11-24T12:00:00Z", "dispatch_by": "probe job"}}`,
			age: time.Hour, probe: true, v: -1, source: "probe job", describ: "probe job"},
		{name: "other kind's", cache: `{"slurm": {"dispatch_s": 0.3, "dispatch_at": "2026-11-24T12:00:00Z", "dispatch_by": "probe job"}}`,
			v: assumedDispatch["local"], describ: "assumed: nothing measured yet"},
		{name: "corrupt", cache: `{"local": {"dispatch_s": 0.3, "dispatch_at": "yesterday"`, v: assumedDispatch["local"], describ: "assumed: nothing measured yet"},
		{name: "corrupt, probe", cache: "\x00\x01", probe: true, v: -1, source: "probe job", describ: "probe job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, map[string]string{EnvVar: "local hosts=4"}, "", "")
			now := base.Add(tc.age)
			o.Now = func() time.Time { return now }
			o.Probe = tc.probe
			if tc.cache != "" {
				if err := os.WriteFile(filepath.Join(o.CacheDir, "cluster.json"), []byte(tc.cache), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Find(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			d := c.Dispatch
			if tc.v >= 0 && d.V != tc.v || tc.v < 0 && !(d.V > 0) || d.Source != tc.source || d.Describe(now) != tc.describ {
				t.Errorf("dispatch %+v (%s), want %v from %q (%s)", d, d.Describe(now), tc.v, tc.source, tc.describ)
			}
			if tc.v >= 0 {
				return
			}
			// A probe's figure is kept, and used for the next hour.
			now = now.Add(30 * time.Minute)
			o.Probe = false
			if c, err = Find(ctx, o); err != nil {
				t.Fatal(err)
			}
			if c.Dispatch.V != d.V || c.Dispatch.Describe(now) != "probe job, 30 min old" {
				t.Errorf("after the probe: %+v (%s), want the probe's %v, 30 min old", c.Dispatch, c.Dispatch.Describe(now), d.V)
			}
		})
	}
}

func TestSave(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	o := options(t, map[string]string{EnvVar: "slurm"}, "", "")
	o.Now = func() time.Time { return now }
	// A stale probe of slurm, to be replaced; sge's entry stays.
	if err := os.WriteFile(filepath.Join(o.CacheDir, "cluster.json"),
		[]byte(`{"slurm": {"dispatch_s": 9, "submit_s": 0.5, "dispatch_at": "2026-11-20T12:00:00Z", "dispatch_by": "probe job"},
		"sge": {"dispatch_s": 7, "dispatch_at": "2026-11-24T11:00:00Z", "dispatch_by": "probe job"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		SaveDispatch(o, "slurm", 1.5),
		SaveBandwidth(o, "slurm", 50e6),
		SaveJobCost(o, "slurm", 0.2),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(10 * time.Minute)
	c, err := Find(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name string
		got  place.Value
		want float64
	}{{"dispatch", c.Dispatch, 1.5}, {"bandwidth", c.Bandwidth, 50e6}, {"job cost", c.JobCost, 0.2}} {
		if v.got.V != v.want || v.got.Describe(now) != "measured in a run, 10 min old" {
			t.Errorf("%s: %+v (%s), want %v measured in a run, 10 min old", v.name, v.got, v.got.Describe(now), v.want)
		}
	}
	if !c.Submit.Assumed() {
		t.Errorf("submit %+v: the old probe's figure outlived its dispatch", c.Submit)
	}
	if m := readCache(o)["sge"]; m.Dispatch != 7 {
		t.Errorf("sge's entry became %+v", m)
	}
	// Nothing measured: bandwidth and job cost are assumed.
	o2 := options(t, map[string]string{EnvVar: "sge"}, "", "")
	if c, err = Find(context.Background(), o2); err != nil {
		t.Fatal(err)
	}
	if c.Bandwidth != (place.Value{V: place.DefaultBandwidth}) || c.JobCost != (place.Value{V: assumedJobCost}) {
		t.Errorf("nothing measured: bandwidth %+v, job cost %+v; want assumed", c.Bandwidth, c.JobCost)
	}
	// The cache's directory is created, and nothing else is left in it.
	o3 := o2
	o3.CacheDir = filepath.Join(t.TempDir(), "a", "b")
	if err := SaveBandwidth(o3, "sge", 1e6); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(o3.CacheDir); err != nil || len(ents) != 1 || ents[0].Name() != "cluster.json" {
		t.Errorf("cache directory: %v, %v; want cluster.json alone", ents, err)
	}
}

// TestProbeFails: a probe that cannot run fails Find for a batch system
// forced by -T, and leaves the assumed figure for one only named.
func TestProbeFails(t *testing.T) {
	// No condor_submit in the empty Bin: the driver cannot open.
	o := options(t, map[string]string{EnvVar: "condor"}, "", "")
	o.Probe = true
	c, err := Find(context.Background(), o)
	if err != nil || !c.Dispatch.Assumed() || c.Dispatch.V != assumedDispatch["condor"] {
		t.Errorf("named: %+v, %v; want the assumed dispatch", c, err)
	}
	o.Kind = "condor"
	if c, err = Find(context.Background(), o); err == nil || !strings.Contains(err.Error(), "probe job on condor") {
		t.Errorf("forced: %+v, %v; want the probe's error", c, err)
	}
}

// TestFindRealBatchSystems finds and measures the SLURM and Grid Engine
// that scripts/slurm.sh and scripts/sge.sh run here.
func TestFindRealBatchSystems(t *testing.T) {
	for _, tc := range []struct{ kind, listing string }{{"slurm", "sinfo"}, {"sge", "qstat -g c"}} {
		t.Run(tc.kind, func(t *testing.T) {
			testutil.NeedBatchSystem(t, tc.kind)
			o := Options{Probe: true, CacheDir: t.TempDir(), ConfigDir: t.TempDir(), Env: func(string) string { return "" }, Catalogs: []string{}}
			// Detected with nothing named, without probing.
			o.Probe = false
			c, err := Find(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if c == nil || !strings.HasPrefix(c.Named, "detected: ") || !c.Dispatch.Assumed() {
				t.Fatalf("detection found %+v, want a batch system that answers, not probed", c)
			}
			o.Kind, o.Probe = tc.kind, true
			if c, err = Find(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			if c.Kind != tc.kind || c.Named != "-T" {
				t.Errorf("found %s named %q, want %s named -T", c.Kind, c.Named, tc.kind)
			}
			if c.Hosts.V < 1 || !strings.HasPrefix(c.Hosts.Source, tc.listing) || c.CoresPerHost.V < 1 || c.CoresPerHost.Assumed() {
				t.Errorf("width: %+v × %+v, want at least one host from %s", c.Hosts, c.CoresPerHost, tc.listing)
			}
			if c.Dispatch.Source != "probe job" || c.Dispatch.V <= 0 || c.Submit.V <= 0 {
				t.Errorf("dispatch %+v, submit %+v: want measured by a probe job", c.Dispatch, c.Submit)
			}
			// The next Find takes the cached figure rather than probing.
			d := c.Dispatch
			if c, err = Find(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			if c.Dispatch.V != d.V || c.Dispatch.Source != d.Source || !c.Dispatch.Measured.Equal(d.Measured) {
				t.Errorf("second Find: dispatch %+v, want the cached %+v", c.Dispatch, d)
			}
		})
	}
}

// TestSlurmQueueWait reads sbatch --test-only's predicted start into the
// dispatch latency: a wait longer than the measured latency wins, and a
// start a year off or at SLURM's end of time (the cores held by jobs
// without a time limit) is no prediction, taken as a probe's longest wait.
func TestSlurmQueueWait(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		start  string // date -d argument, or a literal stamp
		v      float64
		source string
	}{
		{"queue empty", "now", assumedDispatch["slurm"], "assumed: nothing measured yet"},
		{"ten minutes", "+600 seconds", -1, "sbatch --test-only: the queue's predicted wait"},
		{"a year", "+365 days", probeLimit.Seconds(), "sbatch --test-only: no start predicted (the jobs holding the cores have no time limit); taken as a probe's longest wait"},
		{"end of time", "18359-02-25T00:00:00", probeLimit.Seconds(), "sbatch --test-only: no start predicted (the jobs holding the cores have no time limit); taken as a probe's longest wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := fakeBin(t, map[string]string{"sinfo": sinfoSample})
			stamp := `$(date -d '` + tc.start + `' +%Y-%m-%dT%H:%M:%S)`
			if strings.HasPrefix(tc.start, "18359") {
				stamp = tc.start
			}
			testutil.WriteScript(t, bin, "sbatch",
				`echo "sbatch: Job 270 to start at `+stamp+` using 1 processors on nodes vm in partition debug" >&2`)
			o := options(t, map[string]string{EnvVar: "slurm"}, "", bin)
			c, err := Find(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			d := c.Dispatch
			if tc.v < 0 {
				// sbatch prints whole seconds, and the test takes time.
				if d.V < 590 || d.V > 601 {
					t.Errorf("dispatch %v s, want about 600", d.V)
				}
			} else if d.V != tc.v {
				t.Errorf("dispatch %v s, want %v", d.V, tc.v)
			}
			if got := d.Describe(time.Now()); got != tc.source {
				t.Errorf("dispatch from %q, want %q", got, tc.source)
			}
		})
	}
}

// TestJobCostPerTool: each tool is placed with the job cost its own runs
// measured; a tool with none borrows the latest another tool's (or an
// older cache's, which named no tool), saying whose it is; a cache
// written before job costs were kept per tool reads without error.
func TestJobCostPerTool(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	const (
		old      = `{"wq": {"job_cost_s": 0.07, "job_cost_at": "2026-11-24T11:00:00Z"}}`
		perTool  = `{"wq": {"job_cost_by_tool": {"allpairs": {"s": 0.07, "at": "2026-11-24T11:50:00Z"}, "wavefront": {"s": 0.015, "at": "2026-11-24T11:40:00Z"}}}}`
		both     = `{"wq": {"job_cost_s": 0.2, "job_cost_at": "2026-11-24T11:55:00Z", "job_cost_by_tool": {"allpairs": {"s": 0.07, "at": "2026-11-24T11:50:00Z"}}}}`
		oldFirst = `{"wq": {"job_cost_s": 0.2, "job_cost_at": "2026-11-24T10:00:00Z", "job_cost_by_tool": {"allpairs": {"s": 0.07, "at": "2026-11-24T11:50:00Z"}}}}`
	)
	for _, tc := range []struct {
		name, cache, tool string
		want              float64
		source            string // Describe's, at now; "" for assumed
	}{
		{"nothing kept", `{}`, "wavefront", assumedJobCost, ""},
		{"old cache, no tool asks", old, "", 0.07, "measured in a run, 1 h old"},
		{"old cache, a tool asks", old, "wavefront", 0.07, "measured in a run of a tool not recorded (wavefront has none of its own yet), 1 h old"},
		{"its own figure, though older", perTool, "wavefront", 0.015, "measured in a run of wavefront, 20 min old"},
		{"its own figure", perTool, "allpairs", 0.07, "measured in a run of allpairs, 10 min old"},
		{"another tool's latest", perTool, "makeflow", 0.07, "measured in a run of allpairs (makeflow has none of its own yet), 10 min old"},
		{"no tool asks: the latest", perTool, "", 0.07, "measured in a run of allpairs, 10 min old"},
		{"the old figure is later", both, "wavefront", 0.2, "measured in a run of a tool not recorded (wavefront has none of its own yet), 5 min old"},
		{"the old figure is earlier", oldFirst, "wavefront", 0.07, "measured in a run of allpairs (wavefront has none of its own yet), 10 min old"},
		{"a damaged cache is empty", `{"wq": {"job_cost_by_tool": 3}}`, "wavefront", assumedJobCost, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, map[string]string{EnvVar: "wq hosts=8"}, "", "")
			o.Now, o.Tool = func() time.Time { return now }, tc.tool
			if err := os.WriteFile(filepath.Join(o.CacheDir, "cluster.json"), []byte(tc.cache), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Find(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			src := ""
			if !c.JobCost.Assumed() {
				src = c.JobCost.Describe(now)
			}
			if c.JobCost.V != tc.want || src != tc.source {
				t.Errorf("job cost %v (%q), want %v (%q)", c.JobCost.V, src, tc.want, tc.source)
			}
		})
	}
}

// TestSaveJobCostPerTool: a tool's run saves its own job cost, leaving
// the other tools' and an older cache's figure as they were.
func TestSaveJobCostPerTool(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	o := options(t, map[string]string{EnvVar: "wq hosts=8"}, "", "")
	o.Now = func() time.Time { return now }
	if err := os.WriteFile(filepath.Join(o.CacheDir, "cluster.json"),
		[]byte(`{"wq": {"dispatch_s": 0.03, "dispatch_at": "2026-11-24T11:00:00Z", "dispatch_by": "measured in a run", "job_cost_s": 0.07, "job_cost_at": "2026-11-24T11:00:00Z"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		tool string
		cost float64
	}{{"allpairs", 0.07}, {"wavefront", 0.015}, {"wavefront", 0.012}} {
		o := o
		o.Tool = s.tool
		if err := SaveJobCost(o, "wq", s.cost); err != nil {
			t.Fatal(err)
		}
	}
	e := readCache(o)["wq"]
	want := map[string]measurement{
		"allpairs":  {V: 0.07, At: now, Runs: []float64{0.07}},
		"wavefront": {V: 0.0135, At: now, Runs: []float64{0.015, 0.012}},
	}
	if !maps.EqualFunc(e.JobCosts, want, equalMeasurement) || e.JobCost != 0.07 || e.Dispatch != 0.03 {
		t.Errorf("cache entry %+v, want job costs %v beside the old figure and the dispatch", e, want)
	}
}

func equalMeasurement(a, b measurement) bool {
	return math.Abs(a.V-b.V) < 1e-12 && a.At.Equal(b.At) && slices.Equal(a.Runs, b.Runs)
}

// TestJobCostPooled: a tool's job cost is the median of its latest
// runs' (maxJobCosts), so that one run slowed by the load does not
// decide the next run's jobs; a figure kept before runs were counts as
// one run.
func TestJobCostPooled(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	old := measurement{V: 0.05, At: now.Add(-time.Hour)}
	for _, tc := range []struct {
		name   string
		start  measurement
		runs   []float64
		want   float64
		kept   []float64
		source string
	}{
		{"one run", measurement{}, []float64{0.053}, 0.053, []float64{0.053}, "measured in a run of allpairs"},
		{"an outlier among three", measurement{}, []float64{0.053, 0.12, 0.06}, 0.06, []float64{0.053, 0.12, 0.06}, "the median of the last 3 runs of allpairs"},
		{"two: their mean", measurement{}, []float64{0.05, 0.07}, 0.06, []float64{0.05, 0.07}, "the median of the last 2 runs of allpairs"},
		{"an older cache's figure is a run", old, []float64{0.2, 0.06}, 0.06, []float64{0.05, 0.2, 0.06}, "the median of the last 3 runs of allpairs"},
		{"the latest eight", measurement{}, []float64{9, 9, 9, 9, 1, 1, 1, 1, 1}, 1, []float64{9, 9, 9, 1, 1, 1, 1, 1}, "the median of the last 8 runs of allpairs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.start
			for _, v := range tc.runs {
				m = m.add(v, now)
			}
			if math.Abs(m.V-tc.want) > 1e-12 || !slices.Equal(m.Runs, tc.kept) || !m.At.Equal(now) {
				t.Errorf("%+v, want %v of %v at %v", m, tc.want, tc.kept, now)
			}
			if got := m.source("allpairs"); got != tc.source {
				t.Errorf("source %q, want %q", got, tc.source)
			}
		})
	}
}

// TestSaveStartup: a Work Queue run's workers' joining is the batch
// type's dispatch, whatever least wait a run saved as its dispatch, and
// the workers that joined from here are reported.
func TestSaveStartup(t *testing.T) {
	now := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	many := make([]float64, 1000)
	for i := range many {
		many[i] = float64(len(many)-i) / 1000 // descending: saved sorted
	}
	for _, tc := range []struct {
		name      string
		kind      string
		least     float64 // a run's least wait, saved before
		before    []Startup
		st        Startup
		dispatch  float64
		source    string
		here      float64
		hereFirst float64
		joins     []float64
	}{
		{"the joins, not the least wait", "wq", 11e-6, nil,
			Startup{Mean: 0.25, Joined: 8, Joins: []float64{0.4, 0.1, 0.2, 0.3}, Here: 8, HereFirst: 0.1}, 0.25,
			"measured in a run: its 8 workers joined the master 0.25 s after it started, on average, 5 min old", 8, 0.1, []float64{0.1, 0.2, 0.3, 0.4}},
		{"no worker from here", "wq", 0, nil,
			Startup{Mean: 0.5, Joined: 2, Joins: []float64{0.5, 0.5}}, 0.5,
			"measured in a run: its 2 workers joined the master 0.5 s after it started, on average, 5 min old", 0, 0, []float64{0.5, 0.5}},
		{"at most maxJoins kept, spread over them", "wq", 0, nil,
			Startup{Mean: 0.5, Joined: 1000, Joins: many}, 0.5,
			"measured in a run: its 1000 workers joined the master 0.5 s after it started, on average, 5 min old", 0, 0, nil},
		{"a run that saw no worker join saves nothing", "wq", 0.03, nil,
			Startup{}, 0.03, "measured in a run, 5 min old", 0, 0, nil},
		{"a batch system's dispatch is its probe's", "slurm", 0, nil,
			Startup{Mean: 0.25, Joined: 8}, 2, "slurm", 0, 0, nil},
		// A run's start-up varies with the workers' back-off: the
		// decision pools the latest runs', every join weighing alike.
		{"the latest runs pooled", "wq", 0,
			[]Startup{{Mean: 0.3, Joined: 2, Joins: []float64{0.2, 0.4}, Here: 2, HereFirst: 0.2}},
			Startup{Mean: 0.05, Joined: 2, Joins: []float64{0.04, 0.06}, Here: 2, HereFirst: 0.04}, 0.175,
			"measured in the last 2 runs: their 4 workers joined the master 0.17 s after it started, on average, 5 min old", 2, 0.12, []float64{0.04, 0.06, 0.2, 0.4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, map[string]string{EnvVar: tc.kind + " hosts=8 cores=1"}, "", "")
			o.Now = func() time.Time { return now }
			if tc.kind == "slurm" {
				o.Env = func(k string) string {
					if k == EnvVar {
						return "slurm hosts=8 cores=1 dispatch=2"
					}
					return ""
				}
			}
			if tc.least > 0 {
				if err := SaveDispatch(o, tc.kind, tc.least); err != nil {
					t.Fatal(err)
				}
			}
			for _, st := range append(tc.before, tc.st) {
				if err := SaveStartup(o, tc.kind, st); err != nil {
					t.Fatal(err)
				}
			}
			now = now.Add(5 * time.Minute)
			defer func() { now = now.Add(-5 * time.Minute) }()
			c, err := Find(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Dispatch.Describe(now); math.Abs(c.Dispatch.V-tc.dispatch) > 1e-9 || (tc.kind == "wq" && got != tc.source) {
				t.Errorf("dispatch %v (%s), want %v (%s)", c.Dispatch.V, got, tc.dispatch, tc.source)
			}
			if c.HereWorkers.V != tc.here || math.Abs(c.HereJoin-tc.hereFirst) > 1e-9 {
				t.Errorf("workers here %v, the first after %v s; want %v after %v", c.HereWorkers.V, c.HereJoin, tc.here, tc.hereFirst)
			}
			switch {
			case tc.joins != nil && !slices.Equal(c.Joins, tc.joins):
				t.Errorf("joins %v, want %v", c.Joins, tc.joins)
			case tc.st.Joined > maxJoins && tc.kind == "wq":
				if len(c.Joins) != maxJoins || !slices.IsSorted(c.Joins) || c.Joins[0] != many[len(many)-1] {
					t.Errorf("%d joins kept (sorted %v, first %v), want %d sorted from the least", len(c.Joins), slices.IsSorted(c.Joins), c.Joins[0], maxJoins)
				}
			}
		})
	}
}
