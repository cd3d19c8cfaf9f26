// Command wavefront computes a two-dimensional recurrence on this machine's
// cores; see internal/wavefrontcmd.
package main

import (
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/internal/wavefrontcmd"
)

func main() { cmdutil.RunMain(wavefrontcmd.Main) }
