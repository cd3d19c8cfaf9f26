package catalog_test

import (
	"fmt"

	"github.com/rightsize/rightsize/workqueue/catalog"
)

func ExampleParseFilter() {
	// The filter CCTools' work_queue_status sends.
	f, err := catalog.ParseFilter(`true and type=="wq_manager" or type=="wq_master"`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Match(catalog.Record{"type": "wq_master", "project": "p"}))
	fmt.Println(f.Match(catalog.Record{"type": "makeflow"}))
	// Output:
	// true
	// false
}
