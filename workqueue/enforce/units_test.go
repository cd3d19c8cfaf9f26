package enforce

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestWideWorkersCountByCores: a pool that counts its workers in 1-core
// units (Assignment.WorkerCores) gives a master 2; a worker of 4 cores —
// a request of 4 workers in one job, or one started with --cores 4 — is
// 4 of them, not 1: the master holds more than the pool gives it and
// releases it, and a worker looking for a master sees no slot left there.
// Without a unit (a pool that does not say), each worker counts as one.
func TestWideWorkersCountByCores(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name      string
		quota     Quota
		cores     []float64 // the pool's workers at the master, in the order they join
		byPool    string    // the master's cores_by_pool
		released  []int     // workers released (IDs from 1, by join order)
		remaining int       // slots left for the pool's workers
	}{
		{"one of 4 cores beyond 2", Quota{Workers: 2, WorkerCores: 1}, []float64{4}, "tp:4", []int{1}, 0},
		{"one of 4 cores within 4", Quota{Workers: 4, WorkerCores: 1}, []float64{4}, "tp:4", nil, 0},
		{"4 and 1 cores beyond 4: the newest goes", Quota{Workers: 4, WorkerCores: 1}, []float64{4, 1}, "tp:5", []int{2}, 0},
		{"1 and 4 cores beyond 4: the 1-core goes, not the newest", Quota{Workers: 4, WorkerCores: 1}, []float64{1, 4}, "tp:5", []int{1}, 0},
		{"6 cores in units of 4 are 2 workers", Quota{Workers: 3, WorkerCores: 4}, []float64{6}, "tp:6", nil, 1},
		{"no unit: a worker is one", Quota{Workers: 2}, []float64{4}, "tp:4", nil, 1},
		{"a worker of no cores is still one", Quota{Workers: 1, WorkerCores: 1}, []float64{0}, "tp:0", nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEnforcer(time.Minute)
			e.DecidedQuotas(map[string]Quota{"tp": tt.quota}, t0)
			var released []int
			for i, c := range tt.cores {
				for _, a := range e.Joined(Joining{ID: i + 1, Pool: "tp", Key: "k", Cores: c}, t0.Add(time.Duration(i)*time.Second)) {
					if a.Verb == Release {
						released = append(released, a.Worker)
					}
				}
			}
			if !slices.Equal(released, tt.released) {
				t.Errorf("released %v, want %v", released, tt.released)
			}
			rec := master("p", "h1", 9123, "tp:"+strconv.Itoa(len(tt.cores)))
			rec["cores_by_pool"] = tt.byPool
			recs := records(t, rec, poolRecord("tp", Assignment{Project: "p", Name: "h1", Port: 9123, Address: "10.0.0.1",
				Workers: tt.quota.Workers, WorkerCores: tt.quota.WorkerCores}))
			slots, _ := Slots("tp", recs, nil)
			remaining := 0
			for _, s := range slots {
				remaining += s.Remaining
			}
			if remaining != tt.remaining {
				t.Errorf("slots %v: %d left, want %d", slots, remaining, tt.remaining)
			}
		})
	}
}

// TestQuotasForMasterSigned: the unit a pool counts its workers in is
// part of what it signs: a decision whose unit is changed on the way is
// not read, and one signed with it is read with it.
func TestQuotasForMasterSigned(t *testing.T) {
	pw := []byte("s3cret\n")
	as := []Assignment{{Project: "p", Name: "h1", Port: 9123, Address: "10.0.0.1", Workers: 2, WorkerCores: 4}}
	rec := poolRecord("tp")
	Sign(rec, as, pw, time.Now())
	got := QuotasForMaster(Decisions(records(t, rec), pw), Self{Name: "h1", Port: 9123})
	if want := (Quota{Workers: 2, WorkerCores: 4}); got["tp"] != want {
		t.Errorf("signed decision read as %v, want %v", got, want)
	}
	rec["assignments"] = []Assignment{{Project: "p", Name: "h1", Port: 9123, Address: "10.0.0.1", Workers: 2, WorkerCores: 1}}
	if got := QuotasForMaster(Decisions(records(t, rec), pw), Self{Name: "h1", Port: 9123}); len(got) != 0 {
		t.Errorf("a decision whose unit was changed was read: %v", got)
	}
}
