package cluster

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
	"github.com/rightsize/rightsize/model/place"
	"github.com/rightsize/rightsize/workqueue"
	"github.com/rightsize/rightsize/workqueue/catalog"
	"github.com/rightsize/rightsize/workqueue/worker"
)

func TestProjectWidth(t *testing.T) {
	master := func(project string, workers, cores int) catalog.Record {
		return catalog.Record{"type": "wq_master", "project": project, "port": 9123, "workers": workers, "cores_total": cores}
	}
	for _, tc := range []struct {
		name string
		recs []catalog.Record
		want catalogListing
		ok   bool
	}{
		{name: "nothing"},
		{name: "another project", recs: []catalog.Record{master("other", 4, 16)}},
		{name: "a master", recs: []catalog.Record{master("blast", 4, 16), master("other", 9, 9)}, ok: true,
			want: catalogListing{span{Hosts: 4, Cores: 4}, "the catalog: workers of project blast"}},
		{name: "two masters", recs: []catalog.Record{master("blast", 4, 16), master("blast", 2, 2)}, ok: true,
			want: catalogListing{span{Hosts: 6, Cores: 3}, "the catalog: workers of project blast"}},
		{name: "no workers", recs: []catalog.Record{master("blast", 0, 0)}, ok: true,
			want: catalogListing{span{}, "the catalog: workers of project blast"}},
		{name: "CCTools' older names", recs: []catalog.Record{{"type": "wq_master", "project": "blast", "port": 9123, "workers": 2, "total_cores": 8}}, ok: true,
			want: catalogListing{span{Hosts: 2, Cores: 4}, "the catalog: workers of project blast"}},
		{name: "a factory", ok: true, recs: []catalog.Record{master("blast", 2, 2), {"type": "wq_factory", "project": "blast", "max_workers": 10}},
			want: catalogListing{span{Hosts: 10, Cores: 1}, "the catalog: project blast's factories start up to 10 workers (2 connected now)"}},
		{name: "a factory alone", ok: true, recs: []catalog.Record{{"type": "wq_factory", "project": "blast", "max_workers": 10}},
			want: catalogListing{span{Hosts: 10}, "the catalog: project blast's factories start up to 10 workers (0 connected now)"}},
	} {
		got, ok := projectWidth(tc.recs, "blast")
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestFindWorkQueue finds a Work Queue project through a real catalog,
// where a real master advertises the workers connected to it.
func TestFindWorkQueue(t *testing.T) {
	cat := testutil.StartCatalog(t)
	project := fmt.Sprintf("rs%d", time.Now().UnixNano()%1e9)
	m, err := workqueue.Listen(workqueue.Config{Addr: "127.0.0.1:0", Project: project, Catalogs: []string{cat},
		AdvertiseInterval: 50 * time.Millisecond, Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	const workers = 2
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for i := range workers {
		done := make(chan struct{})
		go func() {
			defer close(done)
			worker.Run(ctx, worker.Config{Masters: []string{m.Addr().String()}, Cores: 2, MemoryMB: 100, DiskMB: 100,
				Workdir: t.TempDir(), Logger: testutil.Logger(t).With("worker", i)})
		}()
		t.Cleanup(func() { cancel(); <-done })
	}

	o := Options{Project: project, Catalogs: []string{cat}, Env: func(string) string { return "" },
		ConfigDir: t.TempDir(), CacheDir: t.TempDir(), Bin: t.TempDir()}
	// The catalog hears of the workers at the master's next update.
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var c *place.Cluster
	for {
		if c, err = Find(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if c != nil && c.Hosts.V == workers {
			break
		}
		select {
		case <-deadline.C:
			t.Fatalf("found %+v, want %d workers of project %s", c, workers, project)
		case <-tick.C:
		}
	}
	want := place.Cluster{Kind: "wq", Named: "detected: the catalog lists project " + project, Project: project,
		Hosts:        place.Value{V: workers, Source: "the catalog: workers of project " + project},
		CoresPerHost: place.Value{V: 2, Source: "the catalog: workers of project " + project},
		Dispatch:     place.Value{V: assumedDispatch["wq"]},
		JobCost:      place.Value{V: assumedJobCost},
		Bandwidth:    place.Value{V: place.DefaultBandwidth},
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("found %+v,\nwant %+v", *c, want)
	}

	// Named rather than detected, with the catalog in the setting; a
	// probe is never run on Work Queue.
	o = Options{Env: func(string) string { return "wq project=" + project + " catalog=" + cat + " port=9200" },
		ConfigDir: t.TempDir(), CacheDir: t.TempDir(), Bin: t.TempDir(), Probe: true}
	if c, err = Find(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if c.Named != EnvVar || c.Port != 9200 || c.Hosts.V != workers || c.Hosts.Assumed() || !c.Dispatch.Assumed() {
		t.Errorf("named: %+v; want %d workers from the catalog, assumed dispatch", c, workers)
	}

	// Another project is not detected.
	o = Options{Project: project + "x", Catalogs: []string{cat}, Env: func(string) string { return "" },
		ConfigDir: t.TempDir(), CacheDir: t.TempDir(), Bin: t.TempDir()}
	if c, err = Find(context.Background(), o); err != nil || c != nil {
		t.Errorf("another project: %+v, %v; want none", c, err)
	}
}
