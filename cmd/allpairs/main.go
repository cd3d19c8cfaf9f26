// Command allpairs computes M[i,j] = F(A[i], B[j]) for two sets A and B on
// this machine's cores or, with -T, as blocks on a batch system; see
// internal/allpairscmd.
package main

import (
	"github.com/rightsize/rightsize/internal/allpairscmd"
	"github.com/rightsize/rightsize/internal/cmdutil"
)

func main() { cmdutil.RunMain(allpairscmd.Main) }
