package distcmd

import (
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/rightsize/rightsize/model/cluster"
	"github.com/rightsize/rightsize/workqueue"
)

func TestJoinClock(t *testing.T) {
	start := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	here := func(ip net.IP) bool { return ip.IsLoopback() }
	type join struct {
		after    time.Duration
		ip       string
		features []string
	}
	for _, tc := range []struct {
		name  string
		joins []join
		want  cluster.Startup
	}{
		{"no worker joined", nil, cluster.Startup{}},
		{"two from here, one from elsewhere", []join{
			{300 * time.Millisecond, "10.0.0.7", nil},
			{100 * time.Millisecond, "127.0.0.1", nil},
			{200 * time.Millisecond, "127.0.0.1", nil},
		}, cluster.Startup{Mean: 0.2, Joined: 3, Joins: []float64{0.3, 0.1, 0.2}, Here: 2, HereFirst: 0.1}},
		{"this machine's own worker is not counted", []join{
			{10 * time.Millisecond, "127.0.0.1", []string{"own"}},
			{400 * time.Millisecond, "10.0.0.7", nil},
		}, cluster.Startup{Mean: 0.4, Joined: 1, Joins: []float64{0.4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg workqueue.Config
			heard := 0
			cfg.Joined = func(workqueue.WorkerInfo) { heard++ }
			j := watchJoins(&cfg, here)
			j.ignore("own")
			j.started(start)
			for _, jn := range tc.joins {
				j.now = func() time.Time { return start.Add(jn.after) }
				cfg.Joined(workqueue.WorkerInfo{Addr: &net.TCPAddr{IP: net.ParseIP(jn.ip), Port: 9123}, Features: jn.features})
			}
			if heard != len(tc.joins) {
				t.Errorf("the hook before heard %d joins, want %d", heard, len(tc.joins))
			}
			got := j.startup()
			const eps = 1e-9
			if got.Mean-tc.want.Mean > eps || tc.want.Mean-got.Mean > eps {
				t.Errorf("mean %v, want %v", got.Mean, tc.want.Mean)
			}
			got.Mean = tc.want.Mean
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("startup %+v, want %+v", got, tc.want)
			}
		})
	}
}
