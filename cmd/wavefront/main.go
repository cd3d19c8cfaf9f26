// Command wavefront computes a two-dimensional recurrence on this machine's
// cores or, with -T, as blocks on a batch system; see internal/wavefrontcmd.
package main

import (
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/wavefrontcmd"
)

func main() { cmdutil.RunMain(wavefrontcmd.Main) }
