// Command workqueue runs Work Queue workers, a catalog server, status
// queries and a factory of workers on a batch system. See
// internal/workqueuecmd.
package main

import (
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/workqueuecmd"
)

func main() { cmdutil.RunMain(workqueuecmd.Main) }
