// Command workqueue runs Work Queue workers, a catalog server, status
// queries, a factory of workers on a batch system and the simulator of
// runs (model/sim). See internal/workqueuecmd.
package main

import (
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/workqueuecmd"
)

func main() { cmdutil.RunMain(workqueuecmd.Main) }
