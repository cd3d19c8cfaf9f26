package enforce

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/rightsize/rightsize/workqueue/catalog"
)

// records returns catalog records as a query answers them: through JSON.
func records(t *testing.T, recs ...catalog.Record) []catalog.Record {
	t.Helper()
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	var out []catalog.Record
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func master(project, name string, port int, byPool string) catalog.Record {
	return masterAt(project, name, "10.0.0.1", port, byPool)
}

// masterAt is a master's record as the catalog heard it from address.
func masterAt(project, name, address string, port int, byPool string) catalog.Record {
	return catalog.Record{"type": "wq_master", "project": project, "name": name, "address": address,
		"port": port, "workers_by_pool": byPool}
}

func poolRecord(name string, as ...Assignment) catalog.Record {
	return catalog.Record{"type": PoolType, "name": name, "decision": "", "assignments": as}
}

// TestSlotsSeedExample: seed 000 §4.5.2's example: decisions 100 and 300,
// 50 and 150 of the pool's workers connected, leave 50 and 150 slots, so a
// worker picks proj1 a quarter of the time.
func TestSlotsSeedExample(t *testing.T) {
	recs := records(t,
		master("proj1", "h1", 9123, "ws1:50,unmanaged:7"),
		masterAt("proj2", "h2", "10.0.0.2", 9123, "ws1:150,ws2:10"),
		master("proj3", "h3", 9123, ""), // not in the decision
		poolRecord("ws1",
			Assignment{Project: "proj1", Name: "h1", Port: 9123, Address: "10.0.0.1", Workers: 100},
			Assignment{Project: "proj2", Name: "h2", Port: 9123, Address: "10.0.0.2", Workers: 300},
			Assignment{Project: "gone", Name: "h4", Port: 9123, Address: "10.0.0.4", Workers: 10}),
		poolRecord("ws2", Assignment{Project: "proj3", Name: "h3", Port: 9123, Workers: 5}),
	)
	slots, ok := Slots("ws1", recs, nil)
	want := []Slot{{Addr: "10.0.0.1:9123", Remaining: 50}, {Addr: "10.0.0.2:9123", Remaining: 150}}
	if !ok || !slices.Equal(slots, want) {
		t.Fatalf("Slots = %v, %v; want %v", slots, ok, want)
	}
	picked := [2]int{}
	const n = 1000
	for i := range n {
		picked[Choose(slots, (float64(i)+0.5)/n)]++
	}
	if picked != [2]int{250, 750} {
		t.Errorf("over r uniform in [0,1): picked %v, want [250 750] (25%% / 75%%)", picked)
	}
	if _, ok := Slots("ws9", recs, nil); ok {
		t.Errorf("Slots found a decision of a pool that published none")
	}
}

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slots []int
		r     float64
		want  int
	}{
		{"none", nil, 0.5, -1},
		{"no room", []int{0, 0}, 0.5, -1},
		{"first", []int{1, 3}, 0, 0},
		{"edge", []int{1, 3}, 0.25, 1},
		{"last", []int{1, 3}, 0.999999, 1},
		{"skips full", []int{0, 2, 0, 2}, 0.6, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var slots []Slot
			for _, n := range tc.slots {
				slots = append(slots, Slot{Remaining: n})
			}
			if got := Choose(slots, tc.r); got != tc.want {
				t.Errorf("Choose(%v, %v) = %d, want %d", tc.slots, tc.r, got, tc.want)
			}
		})
	}
}

// TestQuotasForMaster: a master enforces, of each pool's decision, the
// assignment that names it by name and port, the largest if several do.
func TestQuotasForMaster(t *testing.T) {
	ds := Decisions(records(t,
		poolRecord("a", Assignment{Project: "p", Name: "h", Port: 1, Workers: 2}, Assignment{Project: "q", Name: "h", Port: 2, Workers: 5}),
		poolRecord("b", Assignment{Project: "p", Name: "h", Port: 1, Workers: 0}),
		catalog.Record{"type": PoolType, "name": "c", "assignments": "garbage"},
		master("p", "h", 1, ""),
	), nil)
	got := workers(QuotasForMaster(ds, Self{Name: "h", Port: 1}))
	if len(got) != 2 || got["a"] != 2 || got["b"] != 0 {
		t.Errorf("QuotasForMaster = %v, want a:2 b:0", got)
	}
}

// workers is the workers each pool gives, of its quota.
func workers(byPool map[string]Quota) map[string]int {
	out := make(map[string]int, len(byPool))
	for pool, q := range byPool {
		out[pool] = q.Workers
	}
	return out
}

// TestSurplus: the workers a master stops feeding and releases, on logical
// time.
func TestSurplus(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name      string
		decisions map[string]Quota
		workers   []Worker
		want      []int
	}{
		{"within", map[string]Quota{"p": {Workers: 2}}, []Worker{{ID: 1, Pool: "p"}, {ID: 2, Pool: "p"}}, nil},
		{"no decision, no pool", map[string]Quota{"p": {Workers: 0}}, []Worker{{ID: 1, Pool: "q"}, {ID: 2}}, nil},
		{"idle before busy", map[string]Quota{"p": {Workers: 1}},
			[]Worker{{ID: 1, Pool: "p", Holds: 1, Joined: at(3)}, {ID: 2, Pool: "p", Holds: 0, Joined: at(1)}}, []int{2}},
		{"newest idle first", map[string]Quota{"p": {Workers: 1}},
			[]Worker{{ID: 1, Pool: "p", Joined: at(1)}, {ID: 2, Pool: "p", Joined: at(2)}, {ID: 3, Pool: "p", Joined: at(3)}},
			[]int{2, 3}},
		{"draining kept draining", map[string]Quota{"p": {Workers: 1}},
			[]Worker{{ID: 1, Pool: "p", Holds: 2, Joined: at(1), Draining: true}, {ID: 2, Pool: "p", Holds: 2, Joined: at(2)}},
			[]int{1}},
		{"fewest tasks", map[string]Quota{"p": {Workers: 0}, "q": {Workers: 1}},
			[]Worker{{ID: 1, Pool: "p", Holds: 3}, {ID: 2, Pool: "q", Holds: 2}, {ID: 3, Pool: "q", Holds: 1}, {ID: 4}},
			[]int{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Surplus(tc.decisions, tc.workers); !slices.Equal(got, tc.want) {
				t.Errorf("Surplus = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReceived(t *testing.T) {
	for _, tc := range []struct {
		rec  catalog.Record
		want int
	}{
		{catalog.Record{}, -1},
		{catalog.Record{"workers_by_pool": ""}, 0},
		{catalog.Record{"workers_by_pool": "a:3, b:2"}, 2},
		{catalog.Record{"workers_by_pool": "bb:4,unmanaged:1"}, 0},
	} {
		if got := Received(tc.rec, "b"); got != tc.want {
			t.Errorf("Received(%v, b) = %d, want %d", tc.rec, got, tc.want)
		}
	}
}
