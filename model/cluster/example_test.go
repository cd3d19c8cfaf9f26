package cluster_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/rightsize/rightsize/model/cluster"
)

// A user names their Work Queue project, its width and its dispatch
// latency in RIGHTSIZE_CLUSTER; what is not given (the bandwidth here) is
// measured, or, as nothing was, assumed and said to be.
func ExampleFind() {
	cache, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cache)
	env := map[string]string{"RIGHTSIZE_CLUSTER": "wq project=blast hosts=8 cores=4 dispatch=0.1"}
	c, err := cluster.Find(context.Background(), cluster.Options{
		Env:      func(name string) string { return env[name] },
		CacheDir: cache,
		Catalogs: []string{}, // ask no catalog how many workers there are
	})
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	fmt.Printf("%s project %s, named by %s\n", c.Kind, c.Project, c.Named)
	fmt.Printf("%.0f hosts (%s)\n", c.Hosts.V, c.Hosts.Describe(now))
	fmt.Printf("%.0f cores per host (%s)\n", c.CoresPerHost.V, c.CoresPerHost.Describe(now))
	fmt.Printf("dispatch %.2f s (%s)\n", c.Dispatch.V, c.Dispatch.Describe(now))
	fmt.Printf("bandwidth %.0f MB/s (%s)\n", c.Bandwidth.V/1e6, c.Bandwidth.Describe(now))
	// Output:
	// wq project blast, named by RIGHTSIZE_CLUSTER
	// 8 hosts (RIGHTSIZE_CLUSTER)
	// 4 cores per host (RIGHTSIZE_CLUSTER)
	// dispatch 0.10 s (RIGHTSIZE_CLUSTER)
	// bandwidth 125 MB/s (assumed: nothing measured yet)
}
